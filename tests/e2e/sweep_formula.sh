#!/usr/bin/env bash
# End-to-end: the formula tier (`exasim sweep --formula`, models/plan_formula.hpp: no step graph per
# plan) against the analytic estimate on the plans' step graphs (`--analytic`) for every shipped
# sweep (scenarios/sweeps/; the GPT-3 175B sweeps as their tests/data copies at global batch 512,
# the search sweep's first of 16 shards, as tests/e2e/sweep_inprocess.sh runs them):
#  * the same plans with the same status (invalid and infeasible plans are judged alike);
#  * every formula row's step time within 1e-9 relative of the analytic one (the formula re-costs
#    the graphs' own ops by the same functions: the differences are rounding, below 1e-13 when
#    written; the bound leaves room for summation order, while a modelling difference, e.g. one
#    stage's data-parallel ring crossing a leaf group, moved steps by 1e-3);
#  * every breakdown column within 1e-6 of the step, the rates and flops within 1e-6 relative;
#  * a plan out of the formula's scope gets the analytic row itself; the best plan is the same;
#  * --refine-top 3 re-estimates the 3 best on their graphs: those rows equal the analytic rows;
#  * bad flags and a resume in another mode: exit 2.
# Prints max and median |difference| per sweep. Usage: sweep_formula.sh <exasim> <source dir>
set -euo pipefail
exe=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
for f in "$src"/scenarios/sweeps/*.json "$src"/tests/data/sweep-small-gpt-sunway-16.json; do
  name=$(basename "$f" .json)
  name=${name#sweep-}
  small="$src/tests/data/sweep-$name-batch-512.json"
  [ -f "$small" ] && { f=$small; name=$name-batch-512; }
  sample=()
  if grep -q '"search"' "$f"; then sample=(--shard 1/16); fi
  "$exe" sweep "$f" --formula "${sample[@]}" --out "$tmp/$name-f" > /dev/null || fail "$name: --formula exited $?"
  "$exe" sweep "$f" --analytic "${sample[@]}" --out "$tmp/$name-a" > /dev/null || fail "$name: --analytic exited $?"
  echo "$name" >> "$tmp/names"
done
f="$src/tests/data/sweep-gpt-175b-a100-1024-batch-512.json"
"$exe" sweep "$f" --formula --refine-top 3 --out "$tmp/refine" > /dev/null || fail "--refine-top exited $?"
# Bad input, exit 2 each: --refine-top without --formula, 0, with --simulate-top; --formula with
# --analytic; resuming a formula sweep's folder without --formula.
small="$src/tests/data/sweep-small-gpt-sunway-16.json"
expect2() { set +e; "$exe" sweep "$small" "$@" > /dev/null 2>&1; rc=$?; set -e; [ "$rc" -eq 2 ] || fail "sweep $* exited $rc, expected 2"; }
expect2 --refine-top 3 --out "$tmp/bad1"
expect2 --formula --refine-top 0 --out "$tmp/bad2"
expect2 --formula --refine-top 3 --simulate-top 3 --out "$tmp/bad3"
# --formula --simulate-top: the formula tier chooses the candidates, and they are simulated as after
# the analytic stage: the same plans, the same simulated rows (each keeps what it was chosen on as
# formula_<rank_by> instead of analytic_<rank_by>, equal to 1e-9); resumable.
"$exe" sweep "$small" --formula --simulate-top 2 --jobs 2 --out "$tmp/ftop" > /dev/null || fail "--formula --simulate-top exited $?"
"$exe" sweep "$small" --formula --simulate-top 2 --jobs 2 --resume --out "$tmp/ftop" > /dev/null || fail "its resume exited $?"
"$exe" sweep "$small" --simulate-top 2 --jobs 2 --out "$tmp/atop" > /dev/null || fail "--simulate-top exited $?"
python3 - "$tmp" <<'PY' || fail "--formula --simulate-top differs from --simulate-top"
import json, sys
tmp = sys.argv[1]
def sims(d):
    rows = [json.loads(l) for l in open(f"{tmp}/{d}/results.jsonl")]
    assert len({r["plan"] for r in rows}) == len(rows), (d, "a plan twice")
    return {r["plan"]: r for r in rows if r.get("mode") == "simulated"}
f, a = sims("ftop"), sims("atop")
assert len(f) == 2 and sorted(f) == sorted(a), (sorted(f), sorted(a))
rank = json.load(open(f"{tmp}/ftop/sweep.json")).get("rank_by", "step_time_s")
for p in f:
    fk, ak = [k for k in f[p] if k.startswith("formula_")], [k for k in a[p] if k.startswith("analytic_")]
    assert len(fk) == 1 and len(ak) == 1, (fk, ak)
    x, y = f[p].pop(fk[0]), a[p].pop(ak[0])
    assert abs(x - y) <= 1e-9 * abs(y), (p, x, y)
    assert f[p] == a[p], (p, f[p], a[p])
print("formula --simulate-top: plans", sorted(f), "simulated as after the analytic stage")
PY
expect2 --formula --analytic --out "$tmp/bad4"
expect2 --analytic --resume --out "$tmp/small-gpt-sunway-16-f"
python3 - "$tmp" <<'PY' || fail "the formula tier and the analytic estimate disagree"
import json, statistics, sys
tmp = sys.argv[1]
def rows(d):
    return {r["plan"]: r for r in map(json.loads, open(f"{tmp}/{d}/results.jsonl"))}
parts = ["forward_compute_s", "forward_communication_s", "backward_compute_s", "backward_communication_s",
         "optimizer_s", "idle_s"]
bad, compared = [], 0
for name in open(f"{tmp}/names").read().split():
    a, f = rows(name + "-a"), rows(name + "-f")
    if a.keys() != f.keys():
        bad.append(f"{name}: different plans")
        continue
    diffs = []
    for k, ra in a.items():
        rf = f[k]
        if ra["status"] != rf["status"]:
            bad.append(f"{name} plan {k}: {ra['status']} vs {rf['status']}")
        elif rf.get("mode") == "analytic" and rf != ra:
            bad.append(f"{name} plan {k}: a fallback row differs from the analytic row")
        elif rf["status"] == "ok" and rf["mode"] == "formula":
            step = ra["step_time_s"]
            d = abs(rf["step_time_s"] - step) / step
            diffs.append(d)
            for c in parts + ["tokens_per_s", "model_pflops", "sustained_pflops"]:
                scale = step if c in parts else ra[c]  # a breakdown column (seconds) against the step, a rate against itself
                if abs(rf[c] - ra[c]) > 1e-6 * scale: bad.append(f"{name} plan {k}: {c} {rf[c]} vs {ra[c]}")
            if d > 1e-9: bad.append(f"{name} plan {k}: step {rf['step_time_s']} vs {step}")
    ok = [r for r in a.values() if r["status"] == "ok"]
    if ok:
        best = lambda rs: max((r for r in rs.values() if r["status"] == "ok"), key=lambda r: (r["tokens_per_s"], -r["plan"]))["plan"]
        if best(a) != best(f): bad.append(f"{name}: best plan {best(f)} (formula) vs {best(a)} (analytic)")
    compared += len(diffs)
    print(f"{name}: {len(a)} plans, {len(diffs)} formula rows" + (
        f", |step difference| max {max(diffs):.2e}, median {statistics.median(diffs):.2e}" if diffs else
        " (every ok plan out of the formula's scope: analytic rows)"))
ref, a = rows("refine"), rows("gpt-175b-a100-1024-batch-512-a")
refined = [r for r in ref.values() if "formula_tokens_per_s" in r]
if len(refined) != 3: bad.append(f"--refine-top 3 refined {len(refined)} rows")
for r in refined:
    r = dict(r); del r["formula_tokens_per_s"]
    if r != a[r["plan"]]: bad.append(f"refined plan {r['plan']} differs from its analytic row")
if compared < 150: bad.append(f"only {compared} formula rows compared")
for b in bad[:20]: print("  " + b)
sys.exit(1 if bad else 0)
PY
echo "sweep_formula: ok"
