"""exasim report: one self-contained HTML page."""

import html
import json
import math
import os
import sys

from ._mpl import plt
from .fields import BREAKDOWN, STATUSES
from .inputs import (
    InputError, _MISSING, as_number, columns_of, dimension_columns, fail, load_report, load_rows,
    lookup, report_count, report_memory, report_name, status_of, sweep_name,
)
from .output import (
    bigger_is_better, check_out, count_label, distinct, fig_label, figure_png_base64, human,
    write_atomically,
)
from .breakdown import breakdown_seconds, draw_breakdown
from .strategies import draw_strategies
from .validation import draw_validation, load_validation


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
