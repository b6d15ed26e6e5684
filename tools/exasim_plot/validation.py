"""exasim plot validation: predicted against published."""

import math
import textwrap

from ._mpl import plt
from .inputs import as_number, fail, read_json
from .output import distinct, log_ticks


def load_validation(path):
    data = read_json(path, "the output of `exasim validate --json`")
    if isinstance(data, dict) and isinstance(data.get("rows"), list):
        data = data["rows"]
    if not isinstance(data, list):
        fail(f"{path}: expected a JSON array of rows (the output of `exasim validate --json`)")
    for i, r in enumerate(data):
        if not isinstance(r, dict):
            fail(f"{path}: row {i} is not an object")
        for k in ("case", "figure", "predicted", "published"):
            if k not in r:
                fail(f"{path}: row {i} has no \"{k}\" (expected case, figure, predicted, published, error_pct, "
                     "role, unit)")
    return data


def draw_validation(fig, rows, path):
    shown = [r for r in rows if r.get("predicted") is not None]
    hidden = [r for r in rows if r.get("predicted") is None]
    if not shown:
        fail(f"{path}: no row with a predicted value (all {len(rows)} rows are not expressible)")
    units = distinct(str(r.get("unit") or "(no unit)") for r in shown)
    ncols = min(3, len(units))
    nrows = math.ceil(len(units) / ncols)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    within = 0
    preds = 0
    for ax, unit in zip(axes.flat, units):
        pts = [r for r in shown if str(r.get("unit") or "(no unit)") == unit]
        pub = [as_number(r["published"], path, f"published of {r['case']}/{r['figure']}") for r in pts]
        pre = [as_number(r["predicted"], path, f"predicted of {r['case']}/{r['figure']}") for r in pts]
        positive = min(pub + pre) > 0
        lo, hi = min(pub + pre), max(pub + pre)
        if positive:
            ax.set_xscale("log")
            ax.set_yscale("log")
            lo, hi = lo / 1.4, hi * 1.4
        else:
            pad = (hi - lo) * 0.1 or 1
            lo, hi = lo - pad, hi + pad
        line = [lo, hi]
        ax.fill_between(line, [v * 0.9 for v in line], [v * 1.1 for v in line], color="#2ca02c", alpha=0.15,
                        label="±10 %", lw=0)
        ax.plot(line, line, "-", color="#2ca02c", lw=1, label="predicted = published")
        for role, style in (("predicted", dict(marker="o", color="#1f77b4", ls="none")),
                            ("fitted", dict(marker="s", mfc="none", mec="#d62728", mew=1.5, ls="none", ms=8))):
            sel = [(p, q, r) for p, q, r in zip(pub, pre, pts) if (r.get("role") == "fitted") == (role == "fitted")]
            if sel:
                ax.plot([s[0] for s in sel], [s[1] for s in sel],
                        label="prediction" if role == "predicted" else "fitted on this case (not a prediction)",
                        **style)
            for p, q, r in sel:
                ok = abs(q - p) <= 0.1 * abs(p)
                if role == "predicted":
                    preds += 1
                    within += ok
                if not ok:
                    ax.annotate(f"{r['case']} {r['figure']}", (p, q), textcoords="offset points", xytext=(4, -3),
                                fontsize=6, color="#555555")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        if positive:
            log_ticks(ax.xaxis)
            log_ticks(ax.yaxis)
        ax.set_aspect("equal", adjustable="box")
        ax.set_xlabel(f"published ({unit})")
        ax.set_ylabel(f"predicted ({unit})")
        ax.set_title(f"{unit}: {len(pts)} figure(s)", fontsize=9)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=7, loc="upper left")
    for ax in list(axes.flat)[len(units):]:
        ax.set_visible(False)
    cases = distinct(r["case"] for r in rows)
    fig.suptitle(f"exasim predictions vs published measurements\n{len(shown)} figure(s) of {len(cases)} case(s); "
                 f"{within} of {preds} prediction(s) within ±10 %", fontsize=10)
    if hidden:
        width = max(60, int(fig.get_figwidth() * 17))  # characters of 7-point text across the figure
        lines = [f"Not expressible, not plotted ({len(hidden)}):"] + [
            textwrap.fill(f"- {r['case']} {r['figure']}" + (f": {r['reason']}" if r.get("reason") else ""), width,
                          subsequent_indent="  ") for r in hidden]
        fig.text(0.01, -0.01, "\n".join(lines), fontsize=7, va="top", ha="left")
    return len(units)


def plot_validation(args):
    if len(args.inputs) != 1:
        fail("validation: give one file, the output of `exasim validate --json`")
    rows = load_validation(args.inputs[0])
    units = distinct(str(r.get("unit") or "") for r in rows if r.get("predicted") is not None)
    ncols = min(3, max(1, len(units)))
    nrows = max(1, math.ceil(len(units) / ncols))
    fig = plt.figure(figsize=(4.6 * ncols + 0.5, 4.4 * nrows + 0.6), layout="constrained")
    draw_validation(fig, rows, args.inputs[0])
    return fig
