"""Labels, number formatting and atomic writing of figures."""

import base64
import io
import math
import os
import tempfile

from ._mpl import FuncFormatter, LogLocator, NullLocator, plt
from .fields import FIGURES
from .inputs import fail


def fig_label(name):
    key = name.lstrip("/")
    if key in FIGURES:
        return FIGURES[key][0]
    return {"nodes": "nodes", "devices": "devices"}.get(key.split("/")[-1], name)


def bigger_is_better(name):
    key = name.lstrip("/")
    return FIGURES.get(key, (None, not key.endswith("_s")))[1]


def human(v, digits=3):
    """12345678 -> 12.3M; 0.0123 -> 0.0123."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    a = abs(v)
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:.{digits}g}{suffix}"
    if a == 0:
        return "0"
    return f"{v:.{digits}g}"


def log_ticks(axis):
    """Log-axis ticks at 1, 2, 5 x 10^n labelled 50, 200, 1k (matplotlib picks its own on short ranges)."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: human(v)))


def count_label(v):
    return f"{v:,.0f}" if v >= 1 and float(v).is_integer() else f"{v:g}"


def check_out(out, exts):
    if not out:
        fail("--out FILE is required")
    ext = os.path.splitext(out)[1].lower()
    if ext not in exts:
        fail(f"{out}: the output must end in {' or '.join(exts)}")
    if os.path.isdir(out):
        fail(f"{out}: is a folder (expected a file name)")
    return ext


def write_atomically(out, write):
    """write(tmp_path) writes the content; renamed to out only once it is whole."""
    folder = os.path.dirname(os.path.abspath(out))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(out) + ".", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_figure(fig, out):
    ext = os.path.splitext(out)[1].lower()[1:]
    write_atomically(out, lambda tmp: fig.savefig(tmp, format=ext, dpi=110, bbox_inches="tight",
                                                  metadata={"Date": None} if ext == "svg" else None))
    plt.close(fig)


def figure_png_base64(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def distinct(values):
    out = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def sort_key(v):
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (0, float(v), "")
    return (1, 0.0, str(v))
