"""Every name the plots and the report read from exasim's outputs, in one place.

The C++ writers are the authority: tests/plot_fields/check (ctest plot_fields) fails when a name
here is missing from what they write (the golden report.json files, app/sweep.cpp's rows and
sweep.json, app/validate.cpp's rows), and when a module of this package reads a quoted name that
is not listed here.
"""

KINDS = ("scaling", "breakdown", "strategies", "validation", "resilience")
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

# report.json of `exasim run` (app/output.cpp): top-level keys, and the JSON pointers read.
REPORT_KEYS = tuple(FIGURES) + ("breakdown", "scenario", "plan", "sim", "moe", "memory_stage", "critical_path",
                                "assumptions", "memory_per_device_bytes")
REPORT_POINTERS = ("/plan/nodes", "/plan/devices", "/sim/represented_ranks", "/model/name", "/machine/name",
                   "/training/precision", "/sim/fidelity", "/scenario/file", "/scenario/name",
                   "/scenario/description", "/memory_per_device_bytes/total")
# Inside them: a breakdown phase's and a critical-path piece's fields, an assumption's, the memory stage's.
REPORT_INNER = ("seconds", "share", "phase", "kind", "label", "json_path", "value", "reason", "fitted_on",
                "pipeline_stage", "in_flight_micro_batches", "total", "capacity", "name", "description")
# Older reports: memory_per_node_bytes (renamed memory_per_device_bytes); read when present.
REPORT_LEGACY = ("memory_per_node_bytes",)

# A sweep's rows (results.jsonl / results.csv, app/sweep.cpp) and its sweep.json.
SWEEP_ROW = ("plan", "status", "reason")
SWEEP_META = ("name", "base", "dimensions", "pointer", "with", "validation")
# Goodput figures in the rows of a sweep whose base has a "resilience" block (app/sweep.cpp
# resilience_figures), and the throughput columns the resilience plot reads by default.
SWEEP_RESILIENCE = ("goodput", "effective_per_s", "mtti_s", "checkpoint_write_s", "restart_s",
                    "checkpoint_interval_s", "young_interval_s", "daly_interval_s", "tokens_per_s")
# Hand-made row files may name their sweep per row ("sweep" or "base"); read when present.
SWEEP_ROW_OPTIONAL = ("sweep", "base")

# `exasim validate --json` rows (app/validate.cpp), and the validation case files' own keys.
VALIDATION_ROW = ("case", "figure", "predicted", "published", "error_pct", "role", "unit", "reason", "note",
                  "error_points")
VALIDATION_CASE = ("figures", "metric", "source")
# Row files may also be an object holding the rows under "rows" (validation) or "results" (sweep).
ROW_WRAPPERS = ("rows", "results")

ALL_NAMES = frozenset(REPORT_KEYS + REPORT_INNER + REPORT_LEGACY + SWEEP_ROW + SWEEP_META + SWEEP_RESILIENCE + SWEEP_ROW_OPTIONAL + VALIDATION_ROW
                      + VALIDATION_CASE + ROW_WRAPPERS + tuple(k for k, _, _ in BREAKDOWN)
                      + tuple(p.strip("/").split("/")[-1] for p in REPORT_POINTERS))
