#!/usr/bin/env bash
# End-to-end: folded fidelity on pipelined plans whose shared links (supernode uplinks) each
# carry a few pipeline stages, not every class: folded step time equals the exhaustive one.
# d: a GPU fat tree whose data-parallel groups (2 GPUs a node) run NCCL's multi-ring, so a stage
# keeps one class (4 simulated ranks for 256), its nodes straddling two leaf groups; splitting the
# stage by GPU offset, as before, folded it 1.2 % long (a cross-rail flow weighed as foreign).
# Usage: fold_pipeline.sh <exasim> <source dir>
set -euo pipefail
exe=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for n in a b c d; do
  for f in folded exhaustive; do
    "$exe" run "$src/tests/data/fold-pipeline-$n.json" --fidelity $f --out "$tmp/$n-$f" > /dev/null
  done
  python3 - "$tmp/$n-folded/report.json" "$tmp/$n-exhaustive/report.json" "$n" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["sim"]["simulated_ranks"] < b["sim"]["simulated_ranks"], (a["sim"], b["sim"])
err = abs(a["step_time_s"] - b["step_time_s"]) / b["step_time_s"]
assert err < 1e-3, (sys.argv[3], a["step_time_s"], b["step_time_s"])
print(f"fold-pipeline-{sys.argv[3]}: folded {a['step_time_s']:.6g} s, exhaustive {b['step_time_s']:.6g} s, {100 * err:.3f} %")
PY
done
echo "fold_pipeline.sh: ok"
