#!/usr/bin/env bash
# End-to-end: `exasim sweep` on a small sweep (24 plans of a 4-layer GPT on 16 Sunway nodes):
# a full run, a run killed with SIGKILL and resumed (byte-identical results), analytic and
# simulate-top modes, and bad sweep files. Usage: sweep.sh <exasim> <source dir>
set -euo pipefail
exe=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
sweep=$src/tests/data/sweep-small-gpt-sunway-16.json

# 1. The whole sweep, one plan at a time. Not a terminal: nothing on stderr per plan.
"$exe" sweep "$sweep" --out "$tmp/full" > "$tmp/full.txt" 2> "$tmp/full.err" || fail "full sweep exited $?"
[ ! -s "$tmp/full.err" ] || fail "stderr not empty without a terminal: $(cat "$tmp/full.err")"
cat "$tmp/full.txt"
grep -Eq '^24 plans in [0-9.]+ s: [0-9.]+ plans/s' "$tmp/full.txt" || fail "no plans/s line"
grep -q 'top 10 by tokens_per_s (larger is better)' "$tmp/full.txt" || fail "no top-10 table"
grep -q 'ok 18, invalid 6, infeasible 0, error 0' "$tmp/full.txt" || fail "unexpected counts"
grep -q 'most common invalid reasons' "$tmp/full.txt" || fail "no reasons"

python3 - "$tmp/full" <<'PY'
import csv, itertools, json, sys
d = sys.argv[1]
rows = [json.loads(l) for l in open(d + "/results.jsonl")]
assert [r["plan"] for r in rows] == list(range(24)), [r["plan"] for r in rows]
# Plan ids enumerate the product, first dimension outermost; a range {from 1, to 8, times 2}.
space = list(itertools.product([1, 2, 4], [1, 2, 4, 8], [1, 2]))
for r, (t, p, m) in zip(rows, space):
    assert (r["/plan/tensor_parallel"], r["/plan/pipeline_parallel"], r["/plan/micro_batch"]) == (t, p, m), r
    layers_ok = 4 % p == 0
    devices_ok = 16 % (t * p) == 0
    want = "ok" if layers_ok and devices_ok else "invalid"
    assert r["status"] == want, (r, want)
    if want == "invalid":
        assert r["reason"].startswith("/plan/"), r  # the JSON path and what was expected
        assert "mode" not in r and "step_time_s" not in r, r  # pruned, never simulated
    else:
        assert r["mode"] == "simulated"
        # tokens per second: global batch 1024 x sequence 256 per step
        assert abs(r["tokens_per_s"] * r["step_time_s"] - 1024 * 256) < 1e-6 * 1024 * 256, r
        parts = sum(r[k] for k in ["forward_compute_s", "forward_communication_s", "backward_compute_s",
                                   "backward_communication_s", "optimizer_s", "idle_s"])
        assert parts > 0 and parts <= r["step_time_s"] * (1 + 1e-9), r
# The CSV: a header with a column per dimension, then the same rows in the same order.
table = list(csv.DictReader(open(d + "/results.csv", newline="")))
assert len(table) == 24
for r, c in zip(rows, table):
    assert int(c["plan"]) == r["plan"] and c["status"] == r["status"]
    assert int(c["/plan/pipeline_parallel"]) == r["/plan/pipeline_parallel"]
    assert c["reason"] == r.get("reason", ""), (c, r)
PY

# 2. Again into the same folder without --resume: refused (exit 2), pointing at --resume.
set +e
"$exe" sweep "$sweep" --out "$tmp/full" > /dev/null 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "second sweep into a used folder exited $rc, expected 2"
grep -q -- "--resume" "$tmp/err.txt" || fail "message does not mention --resume: $(cat "$tmp/err.txt")"

# 3. Killed with SIGKILL after a few rows (two plans at once), then resumed: the same files.
python3 - "$exe" "$sweep" "$tmp/kill" <<'PY'
import os, signal, subprocess, sys, time
exe, sweep, out = sys.argv[1:4]
p = subprocess.Popen([exe, "sweep", sweep, "--out", out, "--jobs", "2"], stdout=subprocess.DEVNULL)
path = out + "/results.jsonl"
deadline = time.time() + 60
while time.time() < deadline and p.poll() is None:
    try:
        if open(path, "rb").read().count(b"\n") >= 3:
            break
    except FileNotFoundError:
        pass
    time.sleep(0.002)
alive = p.poll() is None
os.kill(p.pid, signal.SIGKILL) if alive else None
p.wait()
n = open(path, "rb").read().count(b"\n")
print(f"sweep killed after {n} rows" if alive else f"sweep finished before the kill ({n} rows)")
PY
"$exe" sweep "$sweep" --out "$tmp/kill" --resume --jobs 2 > "$tmp/resume.txt" 2> /dev/null || fail "resume exited $?"
cmp "$tmp/full/results.csv" "$tmp/kill/results.csv" || fail "results.csv after kill + resume differs"
cmp "$tmp/full/results.jsonl" "$tmp/kill/results.jsonl" || fail "results.jsonl after kill + resume differs"

# 4. A torn last line and a CSV out of step (as an interruption mid-write leaves them): resumed,
# the torn line is dropped and both files come out the same; no plan missing or doubled.
mkdir "$tmp/torn"
cp "$tmp/full/sweep.json" "$tmp/torn/"  # written before the first row: an interruption leaves it
head -n 7 "$tmp/full/results.jsonl" > "$tmp/torn/results.jsonl"
sed -n 8p "$tmp/full/results.jsonl" | head -c 40 >> "$tmp/torn/results.jsonl"
head -n 3 "$tmp/full/results.csv" > "$tmp/torn/results.csv"
"$exe" sweep "$sweep" --out "$tmp/torn" --resume > "$tmp/torn.txt" 2> "$tmp/torn.err" || fail "resume exited $?"
grep -q "torn" "$tmp/torn.err" || fail "no word of the torn line"
grep -q "^17 plans in .* (7 more were already in results.jsonl)" "$tmp/torn.txt" || fail "resume redid or skipped plans: $(cat "$tmp/torn.txt")"
cmp "$tmp/full/results.csv" "$tmp/torn/results.csv" || fail "results.csv after a torn line differs"
cmp "$tmp/full/results.jsonl" "$tmp/torn/results.jsonl" || fail "results.jsonl after a torn line differs"

# 5. --analytic: every row analytic; --simulate-top 3: the 3 best estimates simulated.
"$exe" sweep "$sweep" --out "$tmp/an" --analytic --jobs 2 > /dev/null
"$exe" sweep "$sweep" --out "$tmp/top" --simulate-top 3 --jobs 2 > /dev/null
python3 - "$tmp" <<'PY'
import json, sys
t = sys.argv[1]
an = [json.loads(l) for l in open(t + "/an/results.jsonl")]
top = [json.loads(l) for l in open(t + "/top/results.jsonl")]
full = [json.loads(l) for l in open(t + "/full/results.jsonl")]
assert all(r["mode"] == "analytic" for r in an if r["status"] == "ok")
best = sorted((r for r in an if r["status"] == "ok"), key=lambda r: (-r["tokens_per_s"], r["plan"]))[:3]
sim = [r for r in top if r.get("mode") == "simulated"]
assert sorted(r["plan"] for r in sim) == sorted(r["plan"] for r in best), (sim, best)
for r in sim:  # the simulated row replaces the estimate and keeps what it was chosen on
    assert r["tokens_per_s"] == full[r["plan"]]["tokens_per_s"]
    assert r["analytic_tokens_per_s"] == an[r["plan"]]["tokens_per_s"]
for r in top:
    if r.get("mode") == "analytic":
        assert r == an[r["plan"]]
assert len(top) == 24
PY

# 6. Bad sweep files: exit 2, the file and the JSON path named, nothing written.
bad() {  # name, JSON, expected path in the message
  printf '%s' "$2" > "$tmp/$1.json"
  set +e
  "$exe" sweep "$tmp/$1.json" --out "$tmp/out-$1" > /dev/null 2> "$tmp/$1.err"; rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "$1: exited $rc, expected 2"
  grep -q "$1.json" "$tmp/$1.err" || fail "$1: message does not name the file: $(cat "$tmp/$1.err")"
  grep -q -- "$3" "$tmp/$1.err" || fail "$1: message does not name $3: $(cat "$tmp/$1.err")"
  [ ! -e "$tmp/out-$1" ] || fail "$1: output written for a bad sweep file"
}
base=$src/tests/data/small-gpt-sunway-16.json
bad no-base '{"name": "x", "dimensions": {"/plan/micro_batch": [1, 2]}}' ': /base: '
bad unknown-base '{"base": "no-such-scenario", "dimensions": {"/plan/micro_batch": [1, 2]}}' ': /base: '
bad unknown-pointer "{\"base\": \"$base\", \"dimensions\": {\"/plan/tensor_paralel\": [1, 2]}}" ': /dimensions/~1plan~1tensor_paralel: '
bad empty-dimension "{\"base\": \"$base\", \"dimensions\": {\"/plan/micro_batch\": []}}" ': /dimensions/~1plan~1micro_batch: '
bad not-a-list "{\"base\": \"$base\", \"dimensions\": {\"/plan/micro_batch\": 2}}" ': /dimensions/~1plan~1micro_batch: '
bad empty-range "{\"base\": \"$base\", \"dimensions\": {\"/plan/micro_batch\": {\"from\": 4, \"to\": 1, \"step\": 1}}}" ': /dimensions/~1plan~1micro_batch: '
bad rank-by "{\"base\": \"$base\", \"dimensions\": {\"/plan/micro_batch\": [1]}, \"rank_by\": \"speed\"}" ': /rank_by: '
echo "e2e sweep: ok"
