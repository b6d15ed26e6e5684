"""exasim plots and the one-page HTML report (matplotlib, Agg backend, no network).

`exasim plot ...` and `exasim report ...` write this package (embedded in the binary) to a
temporary folder and run it with python3; it also runs from the source tree:

    PYTHONPATH=tools python3 -m exasim_plot plot KIND INPUT... --out FILE.png|.svg [options]
    PYTHONPATH=tools python3 -m exasim_plot report DIR --out FILE.html

KIND is scaling, breakdown, strategies or validation (see `--help` of each).  Bad input exits 2
with a message naming the file and what was expected, and writes nothing; every output is written
to a temporary name in its folder and renamed into place.

Modules: fields (every report field and sweep column it reads by name, checked against the C++
writers by the plot_fields test), inputs (reading), output (labels, atomic writing), one module
per plot kind, report (the HTML page) and cli (the command line).

Sweep results (`exasim sweep`): results.jsonl (one JSON object per line) or results.csv (the same
as columns), a row per plan with "plan", "status" (ok | invalid | infeasible | error), "reason",
the report figures (step_time_s, tokens_per_s, sustained_pflops, model_tflops_per_device, ...) and
each swept dimension under its JSON-pointer name ("/plan/tensor_parallel").  Every column name is
an option; a short name ("tensor_parallel") finds the one column that ends in "/tensor_parallel".
"""
