#!/usr/bin/env python3
"""exasim plots and the one-page HTML report (matplotlib, Agg backend, no network).

`exasim plot ...` and `exasim report ...` run this file (embedded in the binary) as
`python3 -c <this file> plot|report ARGS`; it also runs directly:

    tools/plot.py plot KIND INPUT... --out FILE.png|.svg [options]
    tools/plot.py report DIR --out FILE.html

KIND is scaling, breakdown, strategies or validation (see `--help` of each).  Bad input exits 2
with a message naming the file and what was expected, and writes nothing; every output is written
to a temporary name in its folder and renamed into place.

Sweep results (`exasim sweep`): results.jsonl (one JSON object per line) or results.csv (the same
as columns), a row per plan with "plan", "status" (ok | invalid | infeasible | error), "reason",
the report figures (step_time_s, tokens_per_s, sustained_pflops, model_tflops_per_device, ...) and
each swept dimension under its JSON-pointer name ("/plan/tensor_parallel").  Every column name is
an option; a short name ("tensor_parallel") finds the one column that ends in "/tensor_parallel".
"""
import base64
import csv
import html
import io
import json
import math
import os
import sys
import tempfile
import textwrap

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.lines
    from matplotlib.patches import Patch, Rectangle
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator
except ImportError:
    if os.environ.get("EXASIM_PYTHON_PROBE"):
        sys.exit(3)  # the exasim binary tries its next python3 and then says what is missing
    sys.stderr.write("exasim plot: needs matplotlib (Debian: python3-matplotlib; tools/setup installs it)\n")
    sys.exit(1)

KINDS = ("scaling", "breakdown", "strategies", "validation")
STATUSES = ("ok", "infeasible", "invalid", "error")

# Report figures: axis label and whether bigger is better.
FIGURES = {
    "sustained_pflops": ("sustained PFLOPS", True),
    "model_pflops": ("model PFLOPS", True),
    "tokens_per_s": ("tokens/s", True),
    "model_tflops_per_device": ("model TFLOPS per device", True),
    "step_time_s": ("step time (s)", False),
}
BREAKDOWN = [
    ("forward_compute", "forward compute", "#1f77b4"),
    ("forward_communication", "forward communication", "#ff7f0e"),
    ("backward_compute", "backward compute", "#aec7e8"),
    ("backward_communication", "backward communication", "#ffbb78"),
    ("optimizer", "optimizer", "#2ca02c"),
    ("idle", "idle", "#c7c7c7"),
]


class InputError(Exception):
    """Bad input: exit status 2."""


def fail(msg):
    raise InputError(msg)


# ---------------------------------------------------------------------------------------------
# Reading inputs
# ---------------------------------------------------------------------------------------------
def read_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        fail(f"{path}: no such file (expected {what})")
    except IsADirectoryError:
        fail(f"{path}: is a folder (expected {what})")
    except json.JSONDecodeError as e:
        fail(f"{path}: not JSON ({e}); expected {what}")
    except (OSError, UnicodeDecodeError) as e:
        fail(f"{path}: cannot read it ({e}); expected {what}")


def unwrap(v):
    """Scenario values may be {"value": ..., "assumption": ...}."""
    while isinstance(v, dict) and "value" in v:
        v = v["value"]
    return v


_MISSING = object()


def lookup(doc, name):
    """A JSON pointer ("/plan/nodes") or a top-level key ("sustained_pflops"); _MISSING if absent."""
    if not name.startswith("/"):
        return unwrap(doc[name]) if isinstance(doc, dict) and name in doc else _MISSING
    cur = doc
    for part in name[1:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        cur = unwrap(cur)
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return unwrap(cur)


def as_number(v, where, what):
    if isinstance(v, bool) or v is None or v is _MISSING:
        fail(f"{where}: expected a number for {what}, got {json.dumps(None if v is _MISSING else v)}")
    try:
        x = float(v)
    except (TypeError, ValueError):
        fail(f"{where}: expected a number for {what}, got {json.dumps(v)}")
    if not math.isfinite(x):
        fail(f"{where}: expected a finite number for {what}, got {v}")
    return x


def load_report(path):
    if os.path.isdir(path):
        path = os.path.join(path, "report.json")
    r = read_json(path, "a report.json written by `exasim run`")
    if not isinstance(r, dict) or "step_time_s" not in r or "breakdown" not in r:
        fail(f"{path}: not a report.json of `exasim run` (expected an object with \"step_time_s\" and \"breakdown\")")
    r["_path"] = path
    return r


def report_name(r):
    s = r.get("scenario")
    if isinstance(s, dict):
        return s.get("name") or os.path.basename(os.path.dirname(r["_path"]))
    return s if isinstance(s, str) else os.path.basename(os.path.dirname(r["_path"]))


def report_count(r):
    """(count, "nodes" | "devices") of a report."""
    plan = r.get("plan") or {}
    for key in ("nodes", "devices"):
        v = unwrap(plan.get(key))
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v), key
    v = lookup(r, "/sim/represented_ranks")
    if v is not _MISSING:
        return as_number(v, r["_path"], "/sim/represented_ranks"), "devices"
    fail(f"{r['_path']}: no node or device count (expected /plan/nodes or /plan/devices)")


def report_memory(r):
    """The memory-per-device object (renamed from memory_per_node_bytes)."""
    for key in ("memory_per_device_bytes", "memory_per_node_bytes"):
        if isinstance(r.get(key), dict):
            return r[key]
    return None


def parse_cell(s):
    if s is None:
        return None
    s = s.strip()
    if s == "" or s.lower() in ("null", "none", "nan"):
        return None
    if s.lower() in ("true", "false"):
        return s.lower() == "true"
    for conv in (int, float):
        try:
            return conv(s)
        except ValueError:
            pass
    return s


def load_rows(path):
    """Rows of a sweep's results.jsonl, results.csv (or a JSON array of objects)."""
    if os.path.isdir(path):
        for name in ("results.jsonl", "results.csv"):
            if os.path.exists(os.path.join(path, name)):
                path = os.path.join(path, name)
                break
        else:
            fail(f"{path}: no results.jsonl or results.csv in this folder (expected a sweep's output)")
    ext = os.path.splitext(path)[1].lower()
    what = "a sweep's results.jsonl (one JSON object per line)"
    rows = []
    if ext == ".jsonl":
        try:
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as e:
                        fail(f"{path}:{n}: not JSON ({e}); expected {what}")
                    if not isinstance(row, dict):
                        fail(f"{path}:{n}: expected a JSON object per line")
                    rows.append(row)
        except FileNotFoundError:
            fail(f"{path}: no such file (expected {what})")
        except (OSError, UnicodeDecodeError) as e:
            fail(f"{path}: cannot read it ({e}); expected {what}")
    elif ext == ".csv":
        try:
            with open(path, encoding="utf-8", newline="") as f:
                reader = csv.DictReader(f)
                if not reader.fieldnames:
                    fail(f"{path}: empty (expected a sweep's results.csv with a header row)")
                rows = [{k: parse_cell(v) for k, v in row.items() if k is not None} for row in reader]
        except FileNotFoundError:
            fail(f"{path}: no such file (expected a sweep's results.csv)")
        except (OSError, UnicodeDecodeError, csv.Error) as e:
            fail(f"{path}: cannot read it ({e}); expected a sweep's results.csv")
    elif ext == ".json":
        data = read_json(path, "a JSON array of result rows")
        if isinstance(data, dict) and isinstance(data.get("results"), list):
            data = data["results"]
        if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
            fail(f"{path}: expected a JSON array of result rows (objects)")
        rows = data
    else:
        fail(f"{path}: expected a sweep's results.jsonl or results.csv (by its extension)")
    if not rows:
        fail(f"{path}: no rows (expected a sweep's results, one row per plan)")
    return rows, path


def columns_of(rows):
    cols = []
    seen = set()
    for r in rows:
        for k in r:
            if k not in seen:
                seen.add(k)
                cols.append(k)
    return cols


def column(rows, name, path, what="column"):
    cols = columns_of(rows)
    if name in cols:
        return name
    alt = name if name.startswith("/") else "/" + name
    if alt in cols:
        return alt
    tail = [c for c in cols if c.endswith("/" + name.lstrip("/"))]
    if len(tail) == 1:
        return tail[0]
    shown = ", ".join(cols[:30]) + (" ..." if len(cols) > 30 else "")
    if len(tail) > 1:
        fail(f"{path}: {what} \"{name}\" is ambiguous ({', '.join(tail)})")
    fail(f"{path}: no {what} \"{name}\" (its columns: {shown})")


def status_of(row, status_col):
    s = row.get(status_col)
    return str(s).strip().lower() if s is not None else ""


def dimension_columns(rows):
    """The swept dimensions: JSON-pointer columns, in the order of the first row; varying first."""
    dims = [c for c in columns_of(rows) if c.startswith("/")]
    varying = [c for c in dims if len({json.dumps(r.get(c), sort_keys=True) for r in rows}) > 1]
    return varying + [c for c in dims if c not in varying]


def ok_rows(rows, path, status_col):
    if not any(status_col in r for r in rows):
        fail(f"{path}: no column \"{status_col}\" (expected each row's status: ok, invalid, infeasible or error)")
    ok = [r for r in rows if status_of(r, status_col) == "ok"]
    if not ok:
        counts = {}
        for r in rows:
            counts[status_of(r, status_col)] = counts.get(status_of(r, status_col), 0) + 1
        shown = ", ".join(f"{v} {k or '(none)'}" for k, v in sorted(counts.items()))
        fail(f"{path}: no row with status \"ok\" ({shown}); expected at least one plan that ran")
    return ok


# ---------------------------------------------------------------------------------------------
# Formatting and output
# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# scaling
# ---------------------------------------------------------------------------------------------
def scaling_points(args):
    """[(series, x, y, label)], x name, what was simulated."""
    points = []
    x_names, subjects = [], []
    y_name = args.y
    for path in args.inputs:
        ext = os.path.splitext(path)[1].lower()
        if ext in (".csv", ".jsonl"):
            rows, path = load_rows(path)
            ok = ok_rows(rows, path, args.status_column)
            if args.x:
                xc = column(rows, args.x, path, "--x column")
            else:
                for cand in ("/plan/nodes", "/plan/devices", "nodes", "devices"):
                    if cand in columns_of(rows):
                        xc = cand
                        break
                else:
                    fail(f"{path}: no /plan/nodes or /plan/devices column; name the x column with --x")
            yc = column(rows, y_name, path, "--y column")
            meta = sweep_meta(path)
            if args.series:
                sc = column(rows, args.series, path, "--series column")
            else:
                # One series per value of the one swept dimension left besides x and those linked with it.
                linked = {d["pointer"] for d in meta.get("dimensions", []) if isinstance(d, dict) and d.get("with") == xc}
                rest = [c for c in dimension_columns(rows) if c != xc and c not in linked
                        and len({json.dumps(r.get(c)) for r in ok}) > 1]
                sc = rest[0] if len(rest) == 1 else None
            if isinstance(meta.get("validation"), str) and not args.published:
                # The sweep names its validation case: its published points are drawn too.
                args.published = os.path.join(args.root, "scenarios", "validation", meta["validation"] + ".json")
            best = {}
            for n, r in enumerate(ok):
                x = as_number(r.get(xc), f"{path} (row {n + 1})", xc)
                y = as_number(r.get(yc), f"{path} (row {n + 1})", yc)
                s = series_label(sc, r.get(sc)) if sc else ""
                better = bigger_is_better(yc)
                if (s, x) not in best or (y > best[(s, x)] if better else y < best[(s, x)]):
                    best[(s, x)] = y  # several plans at one count: the best of them
            points += [(s, x, y, "") for (s, x), y in best.items()]
            x_names.append(xc.split("/")[-1])
            subjects.append(f"sweep {sweep_name(rows, path)}")
        else:
            r = load_report(path)
            if args.x:
                v = lookup(r, args.x)
                if v is _MISSING:
                    fail(f"{r['_path']}: no report figure \"{args.x}\" for --x")
                x, xn = as_number(v, r["_path"], args.x), args.x.split("/")[-1]
            else:
                x, xn = report_count(r)
            v = lookup(r, y_name)
            if v is _MISSING:
                fail(f"{r['_path']}: no report figure \"{y_name}\" for --y (e.g. sustained_pflops, tokens_per_s, "
                     "model_pflops, step_time_s or a JSON pointer)")
            y = as_number(v, r["_path"], y_name)
            s = ""
            series = args.series or "precision"
            for cand in (series, "/training/" + series, "/plan/" + series, "/model/" + series):
                sv = lookup(r, cand)
                if sv is not _MISSING:
                    s = str(sv)
                    break
            else:
                if args.series:
                    fail(f"{r['_path']}: no report field \"{args.series}\" for --series")
            points.append((s, x, y, report_name(r)))
            x_names.append(xn)
            model = lookup(r, "/model/name")
            machine = lookup(r, "/machine/name")
            subjects.append(" on ".join(str(t) for t in (model, machine) if t is not _MISSING))
    return points, distinct(x_names), distinct(subjects)


def sweep_meta(results_path):
    """The sweep.json that `exasim sweep` writes beside its results ({} when there is none)."""
    meta_path = os.path.join(os.path.dirname(os.path.abspath(results_path)), "sweep.json")
    if not os.path.exists(meta_path):
        return {}
    meta = read_json(meta_path, "a sweep's sweep.json (written by exasim sweep)")
    return meta if isinstance(meta, dict) else {}


def series_label(col, value):
    """A series named by its value when it is the precision (as report inputs name it), else column=value."""
    return str(value) if col.endswith("/precision") else f"{col.split('/')[-1]}={value}"


def published_points(args, y_name):
    case = read_json(args.published, "a validation case file (scenarios/validation/*.json)")
    if not isinstance(case, dict) or not isinstance(case.get("figures"), list):
        fail(f"{args.published}: expected a validation case with a \"figures\" array")
    out = []
    for i, f in enumerate(case["figures"]):
        if not isinstance(f, dict) or "scenario" not in f or "published" not in f:
            continue  # derived figures (efficiencies, ratios) have no scenario of their own
        metric = f.get("metric", case.get("metric", ""))
        if metric and metric.lstrip("/") != y_name.lstrip("/"):
            fail(f"{args.published}: /figures/{i} publishes \"{metric}\" but the plot's y is \"{y_name}\" "
                 f"(pick --y {metric})")
        spath = os.path.join(args.root, f["scenario"])
        sc = read_json(spath, f"the scenario named by {args.published} /figures/{i}/scenario "
                              f"(scenario files are read relative to --root, here {args.root})")
        x = _MISSING
        for p in ("/plan/nodes", "/plan/devices"):
            x = lookup(sc, p)
            if x is not _MISSING:
                break
        if x is _MISSING:
            fail(f"{spath}: no /plan/nodes or /plan/devices (expected the count of a published point)")
        prec = lookup(sc, "/training/precision")
        out.append((str(prec) if prec is not _MISSING else "", as_number(x, spath, "/plan/nodes"),
                    as_number(f["published"], args.published, f"/figures/{i}/published"), f.get("figure", "")))
    if not out:
        fail(f"{args.published}: no figure with a \"scenario\" and a \"published\" value")
    return out, case.get("source", os.path.basename(args.published))


def plot_scaling(args):
    points, x_names, subjects = scaling_points(args)
    published, source = published_points(args, args.y) if args.published else ([], "")
    if published:
        print(f"published points: {len(published)} from {args.published}")
    series = sorted(distinct([p[0] for p in points] + [p[0] for p in published]), key=sort_key)
    colors = {s: plt.get_cmap("tab10")(i % 10) for i, s in enumerate(series)}
    fig, ax = plt.subplots(figsize=(8.5, 5.6))
    all_x, all_y = [], []
    for s in series:
        pts = sorted((p for p in points if p[0] == s), key=lambda p: p[1])
        if not pts:
            continue
        xs, ys = [p[1] for p in pts], [p[2] for p in pts]
        x0, y0 = xs[0], ys[0]
        name = s or "simulated"
        ax.plot(xs, ys, "o-", color=colors[s], label=f"{name} (exasim)" if s else "exasim", zorder=3)
        lo, hi = min(xs), max(xs)
        ax.plot([lo, hi], [y0 * lo / x0, y0 * hi / x0], ":", color=colors[s], alpha=0.8, zorder=2)
        for x, y in zip(xs, ys):
            eff = y / (x / x0 * y0) if y0 > 0 else float("nan")
            if not bigger_is_better(args.y):
                eff = 1 / eff if eff else float("nan")
            ax.annotate(f"{100 * eff:.1f}%", (x, y), textcoords="offset points", xytext=(0, -9), ha="center",
                        va="top", fontsize=8, color=colors[s])
        all_x += xs
        all_y += ys + [y0 * hi / x0]
    for i, s in enumerate(series):
        pub = [p for p in published if p[0] == s]
        if pub:
            ax.plot([p[1] for p in pub], [p[2] for p in pub], "D", mfc="none", mec=colors[s], ms=9, mew=1.6,
                    label=f"{s or 'published'}: published ({source})", zorder=4)
            all_x += [p[1] for p in pub]
            all_y += [p[2] for p in pub]
    if min(all_x + all_y) <= 0:
        fail("scaling: every x and y must be positive for log-log axes")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(min(all_y) / 1.4, max(all_y) * 1.3)  # room for the efficiency labels below the points
    ticks = sorted(set(all_x))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(ticks)
    ax.set_xticklabels([count_label(t) for t in ticks], rotation=30 if len(ticks) > 6 else 0)
    log_ticks(ax.yaxis)
    xlabel = " / ".join(x_names)
    ax.set_xlabel(xlabel + " (log)")
    ax.set_ylabel(fig_label(args.y) + " (log)")
    ax.grid(True, which="both", alpha=0.3)
    kind = "Strong" if args.strong else "Weak"
    if args.title and "weak" not in args.title.lower() and "strong" not in args.title.lower():
        args.title = f"{kind} scaling: {args.title}"
    title = args.title or (f"{kind} scaling: {fig_label(args.y)} vs {xlabel}" +
                           (f"\n{'; '.join(subjects)}" if subjects else ""))
    ax.set_title(title + "\n(labels: parallel efficiency vs ideal scaling from the smallest point)", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    handles.append(matplotlib.lines.Line2D([], [], ls=":", color="#555555"))
    labels.append("ideal scaling from each series' smallest point")
    ax.legend(handles, labels, fontsize=8, loc="upper left")
    return fig


# ---------------------------------------------------------------------------------------------
# breakdown
# ---------------------------------------------------------------------------------------------
def breakdown_seconds(r):
    b = r["breakdown"]
    if not isinstance(b, dict):
        fail(f"{r['_path']}: /breakdown is not an object (expected phase -> {{seconds, share}})")
    keys = [k for k, _, _ in BREAKDOWN] + sorted(k for k in b if k not in {k for k, _, _ in BREAKDOWN})
    out = {}
    for k in keys:
        v = b.get(k, 0.0)
        if isinstance(v, dict):
            v = v.get("seconds", 0.0)
        out[k] = as_number(v, r["_path"], f"/breakdown/{k}/seconds")
    return out


def draw_breakdown(ax, reports, horizontal=False):
    names = [report_name(r) for r in reports]
    secs = [breakdown_seconds(r) for r in reports]
    keys = list(secs[0].keys())
    for s in secs[1:]:
        keys += [k for k in s if k not in keys]
    colors = {k: c for k, _, c in BREAKDOWN}
    labels = {k: l for k, l, _ in BREAKDOWN}
    extra = plt.get_cmap("Set3")
    bottom = [0.0] * len(reports)
    pos = list(range(len(reports)))
    for i, k in enumerate(keys):
        vals = [s.get(k, 0.0) for s in secs]
        if not any(vals) and k == "idle":
            continue
        kw = dict(color=colors.get(k, extra(i % 12)), label=labels.get(k, k.replace("_", " ")),
                  edgecolor="white", linewidth=0.5)
        if horizontal:
            ax.barh(pos, vals, left=bottom, height=0.6, **kw)
        else:
            ax.bar(pos, vals, bottom=bottom, width=0.6, **kw)
        bottom = [b + v for b, v in zip(bottom, vals)]
    for p, r, tot in zip(pos, reports, bottom):
        step = as_number(r["step_time_s"], r["_path"], "/step_time_s")
        text = f"{step:.3g} s"
        if horizontal:
            ax.annotate(text, (tot, p), textcoords="offset points", xytext=(4, 0), va="center", fontsize=9)
        else:
            ax.annotate(text, (p, tot), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=9)
    if horizontal:
        ax.set_yticks(pos)
        ax.set_yticklabels(names)
        ax.set_xlabel("seconds per training step")
        ax.set_xlim(0, max(bottom) * 1.15)
    else:
        ax.set_xticks(pos)
        ax.set_xticklabels(names, rotation=20 if len(names) > 3 else 0, ha="right" if len(names) > 3 else "center")
        ax.set_ylabel("seconds per training step")
        ax.set_ylim(0, max(bottom) * 1.12)
    ax.grid(True, axis="x" if horizontal else "y", alpha=0.3)
    ax.set_axisbelow(True)


def plot_breakdown(args):
    reports = [load_report(p) for p in args.inputs]
    fig, ax = plt.subplots(figsize=(max(6.5, 1.5 * len(reports) + 3), 5.4))
    draw_breakdown(ax, reports)
    def names(ptr):
        return distinct(str(lookup(r, ptr)) for r in reports if lookup(r, ptr) is not _MISSING)
    subject = " on ".join(t for t in (", ".join(names("/model/name")), ", ".join(names("/machine/name"))) if t)
    ax.set_title(args.title or "Where a simulated training step's time goes (labels: step time)" +
                 (f"\n{subject}" if subject else ""), fontsize=10)
    handles, labels = ax.get_legend_handles_labels()  # top to bottom, as the bars stack
    ax.legend(handles[::-1], labels[::-1], fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


# ---------------------------------------------------------------------------------------------
# strategies
# ---------------------------------------------------------------------------------------------
def hkey(v):
    """A dimension value as a dict key (list-valued dimensions such as a placement order)."""
    return json.dumps(v) if isinstance(v, (list, dict)) else v


def strategy_cells(rows, path, xc, yc, vc, status_col, maximize):
    xs = sorted(distinct(hkey(r.get(xc)) for r in rows if r.get(xc) is not None), key=sort_key)
    ys = sorted(distinct(hkey(r.get(yc)) for r in rows if r.get(yc) is not None), key=sort_key)
    cells = {}
    for n, r in enumerate(rows):
        key = (hkey(r.get(xc)), hkey(r.get(yc)))
        if key[0] is None or key[1] is None:
            continue
        st = status_of(r, status_col)
        c = cells.setdefault(key, {"best": None, "statuses": set(), "row": None})
        c["statuses"].add(st)
        if st == "ok":
            v = as_number(r.get(vc), f"{path} (row {n + 1})", vc)
            if c["best"] is None or (v > c["best"] if maximize else v < c["best"]):
                c["best"], c["row"] = v, r
    return xs, ys, cells


def cell_mark(c):
    """What a cell without an ok plan shows: its plans' statuses (infeasible, invalid, error or a mix)."""
    if c is None:
        return "no plan"
    marks = [st for st in STATUSES[1:] if st in c["statuses"]]
    return "/".join(marks) if marks else "no plan"


def draw_strategies(fig, ax, rows, path, xc, yc, vc, status_col, maximize):
    xs, ys, cells = strategy_cells(rows, path, xc, yc, vc, status_col, maximize)
    vals = [c["best"] for c in cells.values() if c["best"] is not None]
    if not vals:
        fail(f"{path}: no row with status \"ok\" has both {xc} and {yc}")
    lo, hi = min(vals), max(vals)
    cmap = plt.get_cmap("viridis" if maximize else "viridis_r")
    if hi <= lo:  # one value: a scale around it
        lo, hi = lo - (abs(lo) * 0.1 or 1), hi + (abs(hi) * 0.1 or 1)
    norm = matplotlib.colors.Normalize(vmin=lo, vmax=hi)
    best_val = max(vals) if maximize else min(vals)
    hatches = {"infeasible": "xx", "invalid": "//", "error": "..", "no plan": ""}
    for j, yv in enumerate(ys):
        for i, xv in enumerate(xs):
            c = cells.get((xv, yv))
            if c is not None and c["best"] is not None:
                color = cmap(norm(c["best"]))
                ax.add_patch(Rectangle((i - 0.5, j - 0.5), 1, 1, facecolor=color, edgecolor="white", lw=1.5))
                lum = 0.299 * color[0] + 0.587 * color[1] + 0.114 * color[2]
                bold = c["best"] == best_val
                ax.text(i, j, human(c["best"]), ha="center", va="center", fontsize=9,
                        color="black" if lum > 0.5 else "white", fontweight="bold" if bold else "normal")
                if bold:
                    ax.add_patch(Rectangle((i - 0.46, j - 0.46), 0.92, 0.92, fill=False, edgecolor="red", lw=2.2))
            else:
                mark = cell_mark(c)
                ax.add_patch(Rectangle((i - 0.5, j - 0.5), 1, 1, facecolor="#eeeeee" if mark != "no plan" else "white",
                                       edgecolor="#999999", hatch=hatches.get(mark.split("/")[0], ""), lw=0.8))
                ax.text(i, j, mark, ha="center", va="center", fontsize=8, color="#444444",
                        bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.85))
    ax.set_xlim(-0.5, len(xs) - 0.5)
    ax.set_ylim(-0.5, len(ys) - 0.5)
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels([str(v) for v in xs])
    ax.set_yticks(range(len(ys)))
    ax.set_yticklabels([str(v) for v in ys])
    ax.set_xlabel(xc)
    ax.set_ylabel(yc)
    sm = matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap)
    cb = fig.colorbar(sm, ax=ax, fraction=0.046, pad=0.03)
    cb.set_label(f"best {fig_label(vc)} ({'max' if maximize else 'min'}) over the other dimensions")
    cb.formatter = FuncFormatter(lambda v, _: human(v))
    cb.update_ticks()
    counts = {s: sum(1 for r in rows if status_of(r, status_col) == s) for s in STATUSES}
    legend = [Patch(facecolor="#eeeeee", edgecolor="#999999", hatch=hatches[s], label=f"{s}: no plan of the cell ran")
              for s in ("infeasible", "invalid", "error") if counts[s]]
    legend.append(Patch(facecolor="none", edgecolor="red", lw=2, label="best cell"))
    ax.legend(handles=legend, fontsize=8, loc="upper left", bbox_to_anchor=(0.0, -0.12), ncol=2, frameon=False)
    return counts


def sweep_name(rows, path):
    name = sweep_meta(path).get("name")
    if isinstance(name, str) and name:
        return name
    for key in ("sweep", "base"):
        if rows and isinstance(rows[0].get(key), str):
            return rows[0][key]
    return os.path.basename(os.path.dirname(os.path.abspath(path))) or os.path.basename(path)


def plot_strategies(args):
    if len(args.inputs) != 1:
        fail("strategies: give one sweep results file (results.jsonl or results.csv)")
    rows, path = load_rows(args.inputs[0])
    ok_rows(rows, path, args.status_column)
    dims = dimension_columns(rows)
    if args.x:
        xc = column(rows, args.x, path, "--x column")
    elif dims:
        xc = dims[0]
    else:
        fail(f"{path}: no dimension column (\"/plan/...\"); name them with --x and --y")
    if args.y:
        yc = column(rows, args.y, path, "--y column")
    else:
        rest = [d for d in dims if d != xc]
        if not rest:
            fail(f"{path}: only one dimension column; name the second with --y")
        yc = rest[0]
    vc = column(rows, args.value, path, "--value column")
    maximize = bigger_is_better(vc) if args.best is None else args.best == "max"
    xs = {hkey(r.get(xc)) for r in rows}
    ys = {hkey(r.get(yc)) for r in rows}
    fig, ax = plt.subplots(figsize=(max(6.0, 1.15 * len(xs) + 3.5), max(4.5, 0.75 * len(ys) + 2.8)))
    counts = draw_strategies(fig, ax, rows, path, xc, yc, vc, args.status_column, maximize)
    total = len(rows)
    ax.set_title(args.title or (f"Plans of the sweep {sweep_name(rows, path)}: best {fig_label(vc)} per cell\n"
                                f"{total} plans: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])),
                 fontsize=10)
    return fig


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# report (one HTML page)
# ---------------------------------------------------------------------------------------------
CSS = """
body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}
h1{margin-bottom:4px}h2{border-bottom:2px solid #1f77b4;padding-bottom:3px;margin-top:32px}
.desc{color:#444;font-size:15px}.meta{color:#666;font-size:13px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{background:#f2f6fb;border-left:4px solid #1f77b4;padding:10px 16px;min-width:150px}
.card .v{font-size:22px;font-weight:bold}.card .k{font-size:12px;color:#555}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#eef2f7}
td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.bad td{background:#fde8e8}tr.good td{background:#eaf6ea}
img{max-width:100%;height:auto;border:1px solid #ddd}
.note{font-size:12px;color:#666}
"""


def esc(v):
    return html.escape(str(v), quote=True)


def table(head, rows, num_cols=(), row_classes=None):
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr>"]
    for i, r in enumerate(rows):
        cls = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        out.append(f"<tr{cls}>" + "".join(
            f'<td class="n">{esc(c)}</td>' if j in num_cols else f"<td>{esc(c)}</td>" for j, c in enumerate(r))
                   + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def img(fig, alt):
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{figure_png_base64(fig)}">'


def gib(b):
    return f"{b / 2**30:,.2f} GiB"


def report_run_section(r):
    parts = []
    sc = r.get("scenario") if isinstance(r.get("scenario"), dict) else {}
    name = report_name(r)
    parts.append(f"<h1>{esc(name)}</h1>")
    if sc.get("description"):
        parts.append(f'<p class="desc">{esc(sc["description"])}</p>')
    meta = []
    for label, ptr in (("model", "/model/name"), ("machine", "/machine/name"), ("precision", "/training/precision"),
                       ("fidelity", "/sim/fidelity"), ("scenario file", "/scenario/file")):
        v = lookup(r, ptr)
        if v is not _MISSING:
            meta.append(f"{label}: {esc(v)}")
    try:
        count, unit = report_count(r)
        meta.insert(2, f"{count_label(count)} {unit}")
    except InputError:
        pass
    parts.append(f'<p class="meta">{" &middot; ".join(meta)}</p>')
    cards = [("step time", f"{as_number(r['step_time_s'], r['_path'], '/step_time_s'):.4g} s")]
    for key, label, fmt in (("sustained_pflops", "sustained PFLOPS", "{:.4g}"), ("model_pflops", "model PFLOPS", "{:.4g}"),
                            ("model_tflops_per_device", "model TFLOPS per device", "{:.4g}"),
                            ("tokens_per_s", "tokens/s", None)):
        v = lookup(r, key)
        if v is not _MISSING and v is not None:
            x = as_number(v, r["_path"], key)
            cards.append((label, fmt.format(x) if fmt else f"{x:,.0f}"))
    mem = report_memory(r)
    if mem and "total" in mem:
        text = gib(as_number(mem["total"], r["_path"], "memory total"))
        if mem.get("capacity"):
            text += f" ({100 * mem['total'] / mem['capacity']:.1f} % of {gib(mem['capacity'])})"
        cards.append(("memory per device", text))
    parts.append('<div class="cards">' + "".join(
        f'<div class="card"><div class="v">{esc(v)}</div><div class="k">{esc(k)}</div></div>' for k, v in cards)
                 + "</div>")
    if mem:
        parts.append("<h2>Memory per device</h2>")
        stage = r.get("memory_stage")
        if isinstance(stage, dict) and isinstance(stage.get("pipeline_stage"), (int, float)):
            parts.append(f'<p class="meta">the fullest pipeline stage: {esc(stage["pipeline_stage"])}, holding '
                         f'{esc(stage.get("in_flight_micro_batches", "-"))} micro-batches of activations at its peak</p>')
        parts.append(table(["part", "bytes", ""], [[k.replace("_", " "), f"{as_number(v, r['_path'], k):,.0f}",
                                                    gib(as_number(v, r['_path'], k))]
                                                   for k, v in mem.items()
                                                   if isinstance(v, (int, float))], (1, 2)))
    moe = r.get("moe")
    if isinstance(moe, dict):
        parts.append("<h2>Mixture of experts</h2>")
        parts.append(table(["", "value"], [[k.replace("_", " "), json.dumps(v) if isinstance(v, (dict, list)) else v]
                                           for k, v in moe.items()], (1,)))
    # Breakdown
    parts.append("<h2>Where the step time goes</h2>")
    secs = breakdown_seconds(r)
    b = r["breakdown"]
    labels = {k: l for k, l, _ in BREAKDOWN}
    rows = []
    for k, v in secs.items():
        share = b.get(k, {}).get("share") if isinstance(b.get(k), dict) else None
        rows.append([labels.get(k, k), f"{v:.6g}", f"{100 * share:.1f} %" if isinstance(share, (int, float)) else "-"])
    parts.append(table(["phase", "seconds", "share of the step"], rows, (1, 2)))
    fig, ax = plt.subplots(figsize=(9, 1.9))
    draw_breakdown(ax, [r], horizontal=True)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0, -0.35), ncol=3, frameon=False)
    parts.append(img(fig, "breakdown of the step time"))
    # Critical path
    cp = r.get("critical_path")
    if isinstance(cp, list) and cp:
        parts.append("<h2>Critical path</h2>")
        parts.append('<p class="note">The longest pieces of the critical path through the step.</p>')
        rows = []
        for e in cp:
            if not isinstance(e, dict):
                continue
            s = e.get("seconds")
            sh = e.get("share")
            rows.append([e.get("phase", ""), e.get("kind", ""), e.get("label", ""),
                         f"{s:.6g}" if isinstance(s, (int, float)) else "-",
                         f"{100 * sh:.1f} %" if isinstance(sh, (int, float)) else "-"])
        parts.append(table(["phase", "kind", "what", "seconds", "share"], rows, (3, 4)))
    # Assumptions
    asm = r.get("assumptions")
    if isinstance(asm, list) and asm:
        parts.append("<h2>Assumptions and free parameters</h2>")
        rows = [[a.get("json_path", ""), a.get("kind", "").replace("_", " "), json.dumps(a.get("value")),
                 a.get("reason", "") + (f" (fitted on {a['fitted_on']})" if a.get("fitted_on") else "")]
                for a in asm if isinstance(a, dict)]
        parts.append(table(["JSON path", "kind", "value", "why"], rows))
    sim = r.get("sim")
    if isinstance(sim, dict):
        parts.append('<p class="note">Simulation: ' + esc(", ".join(f"{k.replace('_', ' ')} {v}"
                                                                    for k, v in sim.items())) + "</p>")
    return parts


def report_sweep_section(rows, path, status_col="status"):
    parts = ["<h2>Sweep: " + esc(sweep_name(rows, path)) + "</h2>"]
    counts = {s: sum(1 for r in rows if status_of(r, status_col) == s) for s in STATUSES}
    parts.append("<p>" + esc(f"{len(rows)} plans: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s]))
                 + "</p>")
    ok = [r for r in rows if status_of(r, status_col) == "ok"]
    dims = dimension_columns(rows)
    vc = next((c for c in ("tokens_per_s", "sustained_pflops", "step_time_s") if c in columns_of(rows)), None)
    if ok and len(dims) >= 2 and vc:
        fig, ax = plt.subplots(figsize=(8.5, 5.5))
        draw_strategies(fig, ax, rows, path, dims[0], dims[1], vc, status_col, bigger_is_better(vc))
        ax.set_title(f"best {fig_label(vc)} per ({dims[0]}, {dims[1]}) over the other dimensions", fontsize=10)
        parts.append(img(fig, "strategies heatmap"))
    elif not ok:
        parts.append('<p class="note">No plan of the sweep ran (no row with status ok).</p>')
    if ok and vc:
        best = sorted(ok, key=lambda r: as_number(r.get(vc), path, vc), reverse=bigger_is_better(vc))[:10]
        figs = [c for c in ("step_time_s", "tokens_per_s", "sustained_pflops", "model_tflops_per_device")
                if c in columns_of(rows)]
        head = (["plan"] if "plan" in columns_of(rows) else []) + dims + figs
        parts.append(f"<p>The best {len(best)} plans by {esc(fig_label(vc))}:</p>")
        parts.append(table(head, [[human(r.get(c), 4) if isinstance(r.get(c), float) else
                                   ("-" if r.get(c) is None else r.get(c)) for c in head] for r in best],
                           range(len(head) - len(figs), len(head))))
    bad = [r for r in rows if status_of(r, status_col) != "ok"]
    if bad:
        reasons = {}
        for r in bad:
            key = (status_of(r, status_col), str(r.get("reason") or ""))
            reasons[key] = reasons.get(key, 0) + 1
        parts.append("<p>Plans that did not run:</p>")
        parts.append(table(["status", "reason", "plans"], [[s, why, n] for (s, why), n in
                                                           sorted(reasons.items(), key=lambda kv: -kv[1])[:15]], (2,)))
    return parts


def report_validation_section(rows, path):
    parts = ["<h2>Validation against published measurements</h2>"]
    shown = [r for r in rows if r.get("predicted") is not None]
    if shown:
        units = distinct(str(r.get("unit") or "") for r in shown)
        ncols = min(3, len(units))
        fig = plt.figure(figsize=(4.4 * ncols + 0.5, 4.2 * math.ceil(len(units) / ncols) + 0.6), layout="constrained")
        draw_validation(fig, rows, path)
        parts.append(img(fig, "predicted versus published"))
    trs, classes = [], []
    for r in rows:
        pred = r.get("predicted")
        err = r.get("error_pct")
        if pred is None:
            trs.append([r["case"], r["figure"], "not expressible", r.get("published"), "-", r.get("role", ""),
                        r.get("unit", ""), r.get("reason", "")])
            classes.append("")
            continue
        pts = r.get("error_points")
        errtext = (f"{pts:+.1f} pts" if isinstance(pts, (int, float)) else
                   f"{err:+.1f} %" if isinstance(err, (int, float)) else "-")
        trs.append([r["case"], r["figure"], f"{pred:.4g}", f"{r['published']:.4g}", errtext, r.get("role", ""),
                    r.get("unit", ""), r.get("note", "")])
        e = abs(pts) if isinstance(pts, (int, float)) else abs(err) if isinstance(err, (int, float)) else None
        classes.append("" if e is None else "good" if e <= 10 else "bad")
    parts.append(table(["case", "figure", "predicted", "published", "error", "role", "unit", "note"], trs, (2, 3, 4),
                       classes))
    return parts


def report_main(argv):
    import argparse

    ap = argparse.ArgumentParser(prog="exasim report", description="One self-contained HTML page for a run "
                                 "(DIR/report.json), with DIR/results.jsonl (a sweep) and DIR/validation.json "
                                 "(exasim validate --json) where present.")
    ap.add_argument("dir")
    ap.add_argument("--out", required=True, help="FILE.html")
    args = ap.parse_args(argv)
    try:
        check_out(args.out, (".html", ".htm"))
        d = args.dir
        if not os.path.isdir(d):
            fail(f"{d}: no such folder (expected a run's output folder with report.json)")
        rp = os.path.join(d, "report.json")
        sweep = next((os.path.join(d, n) for n in ("results.jsonl", "results.csv") if os.path.exists(os.path.join(d, n))),
                     None)
        vp = os.path.join(d, "validation.json")
        if not os.path.exists(rp) and not sweep and not os.path.exists(vp):
            fail(f"{d}: no report.json, results.jsonl or validation.json (expected the output folder of exasim run, "
                 "sweep or validate --json)")
        body = []
        title = os.path.basename(os.path.abspath(d))
        if os.path.exists(rp):
            r = load_report(rp)
            title = report_name(r)
            body += report_run_section(r)
        else:
            body.append(f"<h1>{esc(title)}</h1>")
        if sweep:
            rows, sp = load_rows(sweep)
            body += report_sweep_section(rows, sp)
        if os.path.exists(vp):
            body += report_validation_section(load_validation(vp), vp)
        page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>exasim: {esc(title)}</title><style>{CSS}</style></head><body>\n"
                + "\n".join(body)
                + '\n<p class="note">Written by exasim report from ' + esc(", ".join(
                    os.path.basename(p) for p in (rp, sweep or "", vp) if p and os.path.exists(p)))
                + ". Everything on this page is inline; it loads nothing.</p>\n</body></html>\n")

        def write(tmp):
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(page)

        write_atomically(args.out, write)
    except InputError as e:
        sys.stderr.write(f"exasim report: error: {e}\n")
        return 2
    except OSError as e:
        sys.stderr.write(f"exasim report: error: cannot write {args.out}: {e}\n")
        return 1
    print(f"wrote {args.out}")
    return 0


# ---------------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------------
def plot_main(argv):
    import argparse

    ap = argparse.ArgumentParser(prog="exasim plot", description="Plots of exasim results (PNG or SVG).")
    sub = ap.add_subparsers(dest="kind", metavar="KIND", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("inputs", nargs="+", metavar="INPUT")
    common.add_argument("--out", required=True, help="FILE.png or FILE.svg")
    common.add_argument("--title", help="replaces the default title")
    common.add_argument("--status-column", default="status", help="sweep rows: the status column (default status)")
    p = sub.add_parser("scaling", parents=[common], help="throughput vs node or device count (log-log)",
                       description="INPUTs: report.json files of exasim run (one per point) or a sweep's "
                                   "results.csv/results.jsonl (rows with status ok; several at one x: the best).")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--weak", action="store_true", help="weak scaling (default)")
    g.add_argument("--strong", action="store_true", help="strong scaling")
    p.add_argument("--x", help="x: report field or JSON pointer, or sweep column (default: /plan/nodes or /plan/devices)")
    p.add_argument("--y", default="sustained_pflops", help="y: report figure or sweep column (default sustained_pflops)")
    p.add_argument("--series", help="series: report field (default precision, looked up under /training and /plan) "
                                    "or sweep column")
    p.add_argument("--published", help="a validation case file (scenarios/validation/*.json) whose figures are drawn "
                                       "as published points")
    p.add_argument("--root", default=".", help="where the scenario files named by --published are (default .)")
    p = sub.add_parser("breakdown", parents=[common], help="stacked bars of the step time by phase, one per report.json")
    p = sub.add_parser("strategies", parents=[common], help="heatmap of a sweep over two plan dimensions")
    p.add_argument("--x", help="column across (default: the first swept dimension)")
    p.add_argument("--y", help="column down (default: the second swept dimension)")
    p.add_argument("--value", default="tokens_per_s", help="cell value column (default tokens_per_s)")
    p.add_argument("--best", choices=("max", "min"), help="best = max or min (default: min for times, else max)")
    sub.add_parser("validation", parents=[common], help="predicted vs published (input: exasim validate --json)")
    args = ap.parse_args(argv)
    try:
        check_out(args.out, (".png", ".svg"))
        fig = {"scaling": plot_scaling, "breakdown": plot_breakdown, "strategies": plot_strategies,
               "validation": plot_validation}[args.kind](args)
        save_figure(fig, args.out)
    except InputError as e:
        sys.stderr.write(f"exasim plot {args.kind}: error: {e}\n")
        return 2
    except OSError as e:
        sys.stderr.write(f"exasim plot {args.kind}: error: cannot write {args.out}: {e}\n")
        return 1
    print(f"wrote {args.out}")
    return 0


def main(argv):
    if argv and argv[0] == "report":
        return report_main(argv[1:])
    if argv and argv[0] == "plot":
        argv = argv[1:]
    return plot_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
