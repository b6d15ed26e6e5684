"""exasim plot strategies: a heatmap of a sweep over two plan dimensions."""

import json

from ._mpl import FuncFormatter, Patch, Rectangle, matplotlib, plt
from .fields import STATUSES
from .inputs import as_number, column, dimension_columns, fail, load_rows, ok_rows, status_of, sweep_name
from .output import bigger_is_better, distinct, fig_label, human, sort_key


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
