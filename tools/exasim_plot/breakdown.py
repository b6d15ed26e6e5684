"""exasim plot breakdown: stacked bars of the step time by phase."""

from ._mpl import plt
from .fields import BREAKDOWN
from .inputs import _MISSING, as_number, fail, load_report, lookup, report_name
from .output import distinct


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
