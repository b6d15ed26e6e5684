"""exasim plot resilience: throughput against the failed fraction, goodput against the checkpoint interval.

Input: a sweep's rows (results.jsonl / results.csv) whose base scenario has a "resilience" block, so
that each row carries its goodput figures (app/sweep.cpp resilience_figures). The left panel draws
--y (default tokens_per_s) and the effective rate (times goodput) against --x, a swept fault
dimension (default: the first varying column under /faults/), one line per --series (default: the
first varying column under /resilience/, e.g. the node MTBF). The right panel draws Daly's goodput
(models/goodput.hpp) against the checkpoint interval tau for each distinct (job MTTI M, checkpoint
write time delta, restart R):
    goodput(tau) = tau / (M e^{R/M} (e^{(tau + delta)/M} - 1)),
with Young's optimum sqrt(2 delta M) and Daly's higher-order optimum marked, and each row's own
interval (Daly's rounded to whole steps, or the scenario's) and goodput.
"""

import math

from ._mpl import plt
from .inputs import as_number, column, dimension_columns, fail, load_rows, ok_rows
from .output import distinct, fig_label, human, sort_key

def daly_goodput(tau_s, delta_s, restart_s, mtti_s):
    """Expected fraction of wall time that trains (Daly 2006), as models/goodput.cpp computes it."""
    return tau_s / (mtti_s * math.exp(restart_s / mtti_s) * math.expm1((tau_s + delta_s) / mtti_s))

def _default_dimension(rows, prefix):
    for c in dimension_columns(rows):
        if c.startswith(prefix) and len({str(r.get(c)) for r in rows}) > 1:
            return c
    return None

def _number(row, col, path):
    return as_number(row.get(col), path, f"column {col} of plan {row.get('plan')}")

def _series_label(col, v):
    name = col.rstrip("/").split("/")[-1]
    if name.endswith("mtbf_s") and isinstance(v, (int, float)):
        return f"{name} {v / 3.1536e7:.3g} years (365 d)"
    return f"{name} {v}"

def draw_throughput(ax, rows, path, x, y, series):
    groups = distinct(r.get(series) for r in rows) if series else [None]
    groups.sort(key=sort_key)
    for i, g in enumerate(groups):
        sel = [r for r in rows if series is None or r.get(series) == g]
        best = {}
        for r in sel:  # several rows at one x (other dimensions): the best
            xv = _number(r, x, path)
            best[xv] = max(best.get(xv, (-math.inf, 0)), (_number(r, y, path), _number(r, "effective_per_s", path)))
        xs = sorted(best)
        color = plt.get_cmap("tab10")(i % 10)
        label = _series_label(series, g) if series else None
        ax.plot(xs, [best[v][0] for v in xs], "o-", color=color,
                label=f"{fig_label(y)}" if i == 0 else None)
        ax.plot(xs, [best[v][1] for v in xs], "s--", color=color,
                label=("effective (x goodput)" + (f", {label}" if label else "")))
    ax.set_xlabel(x)
    ax.set_ylabel(f"{fig_label(y)} (solid), effective (dashed)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"Throughput against {' '.join(x.strip('/').split('/')[-2:])}", fontsize=10)

def draw_goodput(ax, rows, path, series):
    curves = {}
    for r in rows:
        key = tuple(_number(r, c, path) for c in ("mtti_s", "checkpoint_write_s", "restart_s"))
        curves.setdefault(key, []).append(r)
    for i, ((m, delta, restart), sel) in enumerate(sorted(curves.items())):
        color = plt.get_cmap("tab10")(i % 10)
        lo, hi = min(delta, m) / 5, 20 * m
        taus = [lo * (hi / lo) ** (k / 199) for k in range(200)]
        label = f"MTTI {human(m)} s, checkpoint {human(delta)} s, restart {human(restart)} s"
        if series:
            label = _series_label(series, sel[0].get(series)) + ": " + label
        ax.plot(taus, [daly_goodput(t, delta, restart, m) for t in taus], "-", color=color, label=label)
        young = _number(sel[0], "young_interval_s", path)
        daly = _number(sel[0], "daly_interval_s", path)
        ax.plot([young], [daly_goodput(young, delta, restart, m)], "^", color=color, markersize=8,
                label="Young sqrt(2 delta M)" if i == 0 else None)
        ax.plot([daly], [daly_goodput(daly, delta, restart, m)], "o", color=color, markersize=8,
                markerfacecolor="white", label="Daly's optimum" if i == 0 else None)
        for r in sel:
            ax.plot([_number(r, "checkpoint_interval_s", path)], [_number(r, "goodput", path)], "x", color="black",
                    label="the row's interval" if i == 0 and r is sel[0] else None)
    ax.set_xscale("log")
    ax.set_xlabel("checkpoint interval tau (s of computation)")
    ax.set_ylabel("goodput (fraction of wall time that trains)")
    ax.set_ylim(0, 1)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Goodput against the checkpoint interval (Daly 2006)", fontsize=10)

def plot_resilience(args):
    rows, path = [], None
    for p in args.inputs:
        r, path = load_rows(p)
        rows += ok_rows(r, path, args.status_column)
    y = column(rows, args.y, path, "column for --y")
    if "goodput" not in {k for r in rows for k in r}:
        fail(f"{path}: no column \"goodput\" (expected a sweep whose base scenario has a \"resilience\" block)")
    x = column(rows, args.x, path, "column for --x") if args.x else _default_dimension(rows, "/faults/")
    series = column(rows, args.series, path, "column for --series") if args.series else \
        _default_dimension(rows, "/resilience/")
    panels = 2 if x else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.2 * panels + 1, 5.2))
    axes = list(axes) if panels == 2 else [axes]
    if x:
        draw_throughput(axes[0], rows, path, x, y, series)
    draw_goodput(axes[-1], rows, path, series)
    if args.title:
        fig.suptitle(args.title, fontsize=11)
    return fig
