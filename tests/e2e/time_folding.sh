#!/usr/bin/env bash
# End-to-end: steady-state folding in time (models/pipeline_schedule.hpp). Every shipped pipelined
# scenario (scenarios/ and the golden scenarios, pipeline_parallel > 1) is run folded as shipped
# and again with "engine": {"every_micro_batch": true} (every micro-batch built and replayed); the
# step times must agree within 0.1 %, and the scenarios that fold in time must build fewer
# micro-batches and report them; a plan whose stages tie for the bottleneck (BLOOM-176B's under Megatron's engine,
# tests/data/time-folding-tied-stages.json) must
# fold over a cycle of periods (sim/steady_cycle.hpp). Usage: time_folding.sh <exasim> <source dir>
set -euo pipefail
exe=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src"
python3 - "$exe" "$tmp" <<'PY'
import glob, json, os, subprocess, sys
exe, tmp = sys.argv[1], sys.argv[2]

def value(x):
    return x["value"] if isinstance(x, dict) and "value" in x else x

files = sorted(glob.glob("scenarios/**/*.json", recursive=True) + glob.glob("tests/golden/scenarios/*.json") + ["tests/data/time-folding-tied-stages.json"])
pipelined = []
for f in files:
    s = json.load(open(f))
    plan = s.get("plan") if isinstance(s, dict) else None
    if isinstance(plan, dict) and value(plan.get("pipeline_parallel", 1)) > 1 and "model" in s:
        pipelined.append((f, s))
assert len(pipelined) >= 10, f"expected the shipped pipelined scenarios, found {len(pipelined)}"

def run(name, scenario_file):
    out = os.path.join(tmp, name)
    r = subprocess.run([exe, "run", scenario_file, "--out", out], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {scenario_file}: exit {r.returncode}\n{r.stderr}")
    return json.load(open(os.path.join(out, "report.json")))

folded_count, cycled, worst = 0, 0, 0.0
for i, (f, s) in enumerate(pipelined):
    folded = run(f"f{i}", f)
    s = dict(s)
    s["engine"] = dict(s.get("engine", {}), every_micro_batch=True)
    full_file = os.path.join(tmp, f"full{i}.json")
    json.dump(s, open(full_file, "w"))
    full = run(f"e{i}", full_file)
    assert "time_folding" not in full["sim"], f
    tf = folded["sim"].get("time_folding")
    err = abs(folded["step_time_s"] - full["step_time_s"]) / full["step_time_s"]
    worst = max(worst, err)
    print(f"{f}: folded {folded['step_time_s']:.6f} s"
          + (f" ({tf['simulated_micro_batches']} of {tf['micro_batches']} micro-batches)" if tf else " (not folded in time)")
          + f", every micro-batch {full['step_time_s']:.6f} s, {100 * err:.2e} %")
    if err > 1e-3:
        sys.exit(f"FAIL: {f}: folded in time {folded['step_time_s']} s against {full['step_time_s']} s (> 0.1 %)")
    # The breakdown (the slowest rank's timeline, its steady period repeated) agrees too.
    for k, v in full["breakdown"].items():
        d = abs(folded["breakdown"][k]["seconds"] - v["seconds"])
        assert d <= 1e-3 * full["step_time_s"], f"{f}: breakdown {k}: {folded['breakdown'][k]['seconds']} against {v['seconds']}"
    # The flop counts are the whole step's either way.
    assert abs(folded["executed_flops"] - full["executed_flops"]) <= 1e-9 * full["executed_flops"], f
    if tf:
        folded_count += 1
        assert tf["simulated_micro_batches"] < tf["micro_batches"], f
        assert folded["sim"]["flows"] < full["sim"]["flows"], f
        # Stages tied for the bottleneck (BLOOM-176B's plan): the spacing is a cycle's mean.
        if "tied_stages" in tf:
            cycled += 1
            assert tf["tied_stages"] > 1 and tf["cycle_periods"] > 0, f"{f}: tied stages, no cycle found: {tf}"
            print(f"  {tf['tied_stages']} stages tie: a cycle of {tf['cycle_periods']} periods")
# --fidelity exhaustive always replays every micro-batch.
out = os.path.join(tmp, "exhaustive")
r = subprocess.run([exe, "run", "tests/golden/scenarios/gpu-pipeline-1f1b-h100.json", "--fidelity", "exhaustive",
                    "--out", out], capture_output=True, text=True)
assert r.returncode == 0, r.stderr
assert "time_folding" not in json.load(open(os.path.join(out, "report.json")))["sim"], "exhaustive folded in time"
assert folded_count >= 5, f"expected most shipped pipelined scenarios to fold in time, {folded_count} did"
assert cycled >= 1, "expected tests/data/time-folding-tied-stages.json (BLOOM-176B's plan under Megatron's engine) to fold in time over a cycle of tied stages"
print(f"{len(pipelined)} pipelined scenarios, {folded_count} folded in time, worst step-time difference {100 * worst:.2e} %")
PY
