#!/usr/bin/env bash
# End-to-end: `exasim plot` renders each kind from the fixtures of tests/data/plot into a PNG of sane
# size that is not blank and into an SVG that parses; bad input exits 2 naming the file and writes
# nothing. Usage: plot.sh <exasim> <source dir>
set -euo pipefail
exe=$1; src=$2
data=$src/tests/data/plot
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A python3 with matplotlib to check the images (the one exasim itself finds).
py=
for p in "${EXASIM_PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$p" ] && "$p" -c 'import matplotlib' 2>/dev/null && { py=$p; break; }
done
[ -n "$py" ] || fail "no python3 with matplotlib (Debian: python3-matplotlib, installed by tools/setup)"

check_png() {  # FILE: PNG header size between 300 and 5000 px, more than one colour
  "$py" - "$1" <<'PY' || fail "bad PNG $1"
import struct, sys
import matplotlib.image as mpimg
path = sys.argv[1]
with open(path, "rb") as f:
    head = f.read(24)
assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", head[16:24])
assert 300 <= w <= 5000 and 300 <= h <= 5000, (w, h)
img = mpimg.imread(path)
flat = img.reshape(-1, img.shape[-1])
colours = len({tuple(p) for p in flat[:: max(1, len(flat) // 50000)].tolist()})
assert colours > 20, f"only {colours} colours"
print(f"  {path.split('/')[-1]}: {w}x{h}, {colours} colours")
PY
}
check_svg() {
  "$py" -c 'import sys, xml.etree.ElementTree as ET; r = ET.parse(sys.argv[1]).getroot(); assert r.tag.endswith("svg"), r.tag' "$1" \
    || fail "bad SVG $1"
}
plot() {  # KIND ARGS...: must succeed
  "$exe" plot "$@" > "$tmp/out.txt" 2>&1 || { cat "$tmp/out.txt"; fail "exasim plot $* exited $?"; }
}

# scaling: report.json files with the published BaGuaLu points (scenario files read from --root).
plot scaling "$data"/report-weak-*.json --published "$src/scenarios/validation/bagualu-weak-scaling.json" \
  --root "$src" --out "$tmp/scaling.png"
check_png "$tmp/scaling.png"
plot scaling "$data"/report-weak-*-mixed.json --strong --y tokens_per_s --out "$tmp/scaling.svg"
check_svg "$tmp/scaling.svg"
grep -q "Strong scaling" "$tmp/scaling.svg" || fail "the strong-scaling title is missing"
# ... and from a sweep's rows (best y at each x, one series per tensor-parallel size).
plot scaling "$data/sweep/results.csv" --x micro_batch --y tokens_per_s --series tensor_parallel --out "$tmp/scaling-sweep.png"
check_png "$tmp/scaling-sweep.png"

# breakdown: one bar per report.
plot breakdown "$data"/report-weak-{6000,12000,24000}-fp32.json --out "$tmp/breakdown.png"
check_png "$tmp/breakdown.png"
plot breakdown "$data"/report-weak-6000-mixed.json --out "$tmp/breakdown.svg"
check_svg "$tmp/breakdown.svg"

# strategies: from results.jsonl and from results.csv, default and named dimensions.
plot strategies "$data/sweep/results.jsonl" --out "$tmp/strategies.png"
check_png "$tmp/strategies.png"
plot strategies "$data/sweep/results.csv" --x /plan/pipeline_parallel --y /plan/tensor_parallel --value step_time_s \
  --out "$tmp/strategies.svg"
check_svg "$tmp/strategies.svg"
grep -q "infeasible" "$tmp/strategies.svg" || fail "no infeasible cell marked"
grep -q "invalid" "$tmp/strategies.svg" || fail "no invalid cell marked"

# A list-valued dimension (a placement order) is a category like any other.
printf '%s\n' '{"plan":"a","status":"ok","tokens_per_s":10,"/plan/placement":["tensor","data"],"/plan/tensor_parallel":1}' \
  '{"plan":"b","status":"ok","tokens_per_s":20,"/plan/placement":["data","tensor"],"/plan/tensor_parallel":2}' \
  '{"plan":"c","status":"invalid","reason":"x","/plan/placement":["data","tensor"],"/plan/tensor_parallel":1}' \
  > "$tmp/placement.jsonl"
plot strategies "$tmp/placement.jsonl" --out "$tmp/placement.png"
check_png "$tmp/placement.png"

# validation: predicted vs published; the not-expressible row is listed, not plotted.
plot validation "$data/validation.json" --out "$tmp/validation.png"
check_png "$tmp/validation.png"
plot validation "$data/validation.json" --out "$tmp/validation.svg"
check_svg "$tmp/validation.svg"
grep -q "Not expressible" "$tmp/validation.svg" || fail "no caption of the not-expressible rows"

# resilience: throughput against the stragglers' fraction and goodput against the checkpoint interval,
# from the rows of scenarios/sweeps/bagualu-14.5t-resilience.json; the plot's Daly goodput is the
# C++ model's (each row's goodput at its own interval), and Daly's optimum beats Young's and
# intervals twice as long or short.
plot resilience "$data/resilience/results.jsonl" --out "$tmp/resilience.png"
check_png "$tmp/resilience.png"
plot resilience "$data/resilience/results.jsonl" --out "$tmp/resilience.svg"
check_svg "$tmp/resilience.svg"
grep -q "Daly" "$tmp/resilience.svg" || fail "no Daly optimum in the resilience plot"
PYTHONPATH="$src/tools" "$py" - "$data/resilience/results.jsonl" <<'PY' || fail "resilience goodput"
import json, sys
from exasim_plot.resilience import daly_goodput
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len({r["/resilience/node_mtbf_s"] for r in rows}) == 4 and len({r["/faults/stragglers/fraction"] for r in rows}) == 5
for r in rows:
    g = lambda tau: daly_goodput(tau, r["checkpoint_write_s"], r["restart_s"], r["mtti_s"])
    assert abs(g(r["checkpoint_interval_s"]) - r["goodput"]) <= 1e-9 * r["goodput"], (g(r["checkpoint_interval_s"]), r)
    t = r["daly_interval_s"]
    assert g(t) >= max(g(r["young_interval_s"]), g(t / 2), g(2 * t)), r
PY
# Bad input: exit 2, a message naming the file and what was expected, no output file.
printf '{"plan":"a","status":"infeasible","reason":"too big","/plan/tensor_parallel":1,"/plan/pipeline_parallel":1}\n' \
  > "$tmp/empty.jsonl"
mkdir "$tmp/bad"
bad() {  # PATTERN KIND ARGS...: exits 2, stderr matches PATTERN, writes nothing
  local pattern=$1; shift
  set +e
  "$exe" plot "$@" > /dev/null 2> "$tmp/err.txt"; local rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "exasim plot $* exited $rc, expected 2: $(cat "$tmp/err.txt")"
  grep -q -- "$pattern" "$tmp/err.txt" || fail "exasim plot $*: message lacks '$pattern': $(cat "$tmp/err.txt")"
  [ -z "$(ls -A "$tmp/bad")" ] || fail "exasim plot $* left files: $(ls -A "$tmp/bad")"
}
bad "no-such.json: no such file" breakdown "$tmp/no-such.json" --out "$tmp/bad/x.png"
bad "results.csv: no --x column \"nope\"" strategies "$data/sweep/results.csv" --x nope --out "$tmp/bad/x.png"
bad "results.jsonl: no --value column \"flops\"" strategies "$data/sweep/results.jsonl" --value flops --out "$tmp/bad/x.png"
bad "empty.jsonl: no row with status \"ok\"" strategies "$tmp/empty.jsonl" --out "$tmp/bad/x.png"
bad "empty.jsonl: no row with status \"ok\"" scaling "$tmp/empty.jsonl" --x tensor_parallel --out "$tmp/bad/x.png"
bad "no column \"goodput\"" resilience "$data/sweep/results.jsonl" --out "$tmp/bad/x.png"
bad "invalid choice: 'pie'" pie "$data/validation.json" --out "$tmp/bad/x.png"
bad "must end in .png or .svg" breakdown "$data/report-weak-6000-fp32.json" --out "$tmp/bad/x.pdf"
bad "not a report.json" breakdown "$data/validation.json" --out "$tmp/bad/x.png"
bad "no-such-root/scenarios/weak-scaling" scaling "$data/report-weak-6000-fp32.json" \
  --published "$src/scenarios/validation/bagualu-weak-scaling.json" --root "$tmp/no-such-root" --out "$tmp/bad/x.png"
bad "publishes \"sustained_pflops\"" scaling "$data/report-weak-6000-fp32.json" --y tokens_per_s \
  --published "$src/scenarios/validation/bagualu-weak-scaling.json" --root "$src" --out "$tmp/bad/x.png"
# A sweep that names its validation case: a linked weak-scaling sweep (experts grow with the nodes)
# writes sweep.json, and the scaling plot of its rows overlays the case's published points itself.
cat > "$tmp/weak.json" <<EOF
{"name": "weak-small", "base": "scenarios/weak-scaling/bagualu-weak-6000-fp32.json",
 "dimensions": {"/plan/nodes": [6000, 12000], "/model/experts_per_layer": {"with": "/plan/nodes", "values": [25, 50]}},
 "rank_by": "sustained_pflops", "validation": "bagualu-weak-scaling"}
EOF
(cd "$src" && "$exe" sweep "$tmp/weak.json" --out "$tmp/weak" > "$tmp/weak.txt") || fail "weak sweep failed"
grep -q 'ok 2, invalid 0' "$tmp/weak.txt" || fail "weak sweep: $(cat "$tmp/weak.txt")"
python3 - "$tmp/weak" <<'PY' || fail "weak sweep rows"
import json, sys
d = sys.argv[1]
meta = json.load(open(d + "/sweep.json"))
assert meta["validation"] == "bagualu-weak-scaling" and meta["plans"] == 2, meta
assert meta["dimensions"][1] == {"pointer": "/model/experts_per_layer", "values": [25, 50], "with": "/plan/nodes"}, meta
rows = [json.loads(l) for l in open(d + "/results.jsonl")]
assert [(r["/plan/nodes"], r["/model/experts_per_layer"]) for r in rows] == [(6000, 25), (12000, 50)], rows
PY
(cd "$src" && "$exe" plot scaling "$tmp/weak/results.jsonl" --out "$tmp/weak.png" > "$tmp/weak-plot.txt") || fail "weak plot"
grep -q "published points: 10 from ./scenarios/validation/bagualu-weak-scaling.json" "$tmp/weak-plot.txt" \
  || fail "no published overlay: $(cat "$tmp/weak-plot.txt")"
check_png "$tmp/weak.png"
echo "e2e plot: ok"
