"""exasim plot scaling: throughput against node or device count."""

import json
import os

from ._mpl import NullLocator, matplotlib, plt
from .inputs import (
    _MISSING, as_number, column, columns_of, dimension_columns, fail, load_report, load_rows, lookup,
    ok_rows, read_json, report_count, report_name, sweep_meta, sweep_name,
)
from .output import bigger_is_better, count_label, distinct, fig_label, log_ticks, sort_key


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
