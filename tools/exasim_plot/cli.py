"""The command line: `plot KIND ...` and `report DIR ...`."""

import sys

from .inputs import InputError
from .output import check_out, save_figure
from .scaling import plot_scaling
from .breakdown import plot_breakdown
from .strategies import plot_strategies
from .validation import plot_validation
from .resilience import plot_resilience
from .report import report_main


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
    p = sub.add_parser("resilience", parents=[common],
                       help="throughput vs the failed fraction, goodput vs the checkpoint interval",
                       description="INPUTs: a sweep's results.jsonl/results.csv whose base scenario has a "
                                   "\"resilience\" block (rows with status ok).")
    p.add_argument("--x", help="the fault column (default: the first varying /faults/ dimension; none: goodput only)")
    p.add_argument("--y", default="tokens_per_s", help="throughput column (default tokens_per_s)")
    p.add_argument("--series", help="one line per value (default: the first varying /resilience/ dimension)")
    args = ap.parse_args(argv)
    try:
        check_out(args.out, (".png", ".svg"))
        fig = {"scaling": plot_scaling, "breakdown": plot_breakdown, "strategies": plot_strategies,
               "validation": plot_validation, "resilience": plot_resilience}[args.kind](args)
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
