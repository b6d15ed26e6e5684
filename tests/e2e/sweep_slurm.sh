#!/usr/bin/env bash
# End-to-end: a sweep spread over a real one-node Slurm cluster (tests/slurm/cluster.sh starts
# munge, slurmctld and slurmd as root in a folder of their own and this script stops them at the
# end). `exasim sweep --slurm --array-size 4 --submit` submits a real 4-task job array; the merged
# rows equal an unsharded run's rows; a shard killed mid-way (scancel --signal=KILL) and submitted
# again leaves no row lost or doubled; sbatch's refusal of an option is exit 2 with nothing
# written; merging shards of different sweep files is exit 2. Skipped (exit 77) with the cluster
# script's message where the daemons cannot start. Usage: sweep_slurm.sh <exasim> <source dir>
set -euo pipefail
exe=$(readlink -f "$1"); src=$2
tmp=$(mktemp -d)
cleanup() { bash "$src/tests/slurm/cluster.sh" stop "$tmp/cluster"; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/arr/slurm/*.log; do [ -f "$f" ] && { echo "== $f"; tail -5 "$f"; }; done; exit 1; }
set +e
env_line=$(bash "$src/tests/slurm/cluster.sh" start "$tmp/cluster"); rc=$?
set -e
if [ "$rc" -ne 0 ]; then echo "SKIP: no Slurm cluster could start here (see above)"; exit 77; fi
eval "$env_line"
sinfo
# Every micro-batch replayed, so that a shard takes seconds and can be killed mid-way (step 3).
sweep=$src/tests/data/sweep-slow-gpt-sunway-16.json

# Waits until job $1 has left the queue (at most 300 s).
wait_job() {
  for _ in $(seq 1 600); do
    [ -z "$(squeue -h -j "$1" 2> /dev/null)" ] && return 0
    sleep 0.5
  done
  fail "job $1 still queued after 300 s: $(squeue)"
}

# 1. The unsharded reference, simulated.
"$exe" sweep "$sweep" --out "$tmp/ref" > /dev/null

# 2. A real 4-task array, each task a shard; merged, the rows of the unsharded run.
"$exe" sweep "$sweep" --slurm --array-size 4 --submit --out "$tmp/arr" > "$tmp/submit.txt"
cat "$tmp/submit.txt"
job=$(awk '/^submitted job/ {print $3}' "$tmp/submit.txt")
[ -n "$job" ] || fail "no job id in: $(cat "$tmp/submit.txt")"
grep -q '^#SBATCH --array=1-4$' "$tmp/arr/slurm/sweep.sbatch" || fail "not a 4-task array"
wait_job "$job"
for i in 1 2 3 4; do
  [ "$(wc -l < "$tmp/arr/shard-$i/results.jsonl")" -eq 6 ] || fail "shard $i: not 6 rows"
done
"$exe" sweep --merge "$tmp"/arr/shard-{1,2,3,4} --out "$tmp/merged" > "$tmp/merge.txt" || fail "merge exited $?"
cmp "$tmp/ref/results.jsonl" "$tmp/merged/results.jsonl" || fail "merged rows differ from the unsharded run's"
cmp "$tmp/ref/results.csv" "$tmp/merged/results.csv" || fail "merged CSV differs from the unsharded run's"

# 3. Shard 3 again from nothing, killed with SIGKILL once it has written a row, then its task
# submitted again (sbatch --array=3 on the same script): it resumes, and the merge has every
# plan exactly once.
rm -rf "$tmp/arr/shard-3"
job3=$(sbatch --parsable --array=3 "$tmp/arr/slurm/sweep.sbatch")
for _ in $(seq 1 600); do
  [ -s "$tmp/arr/shard-3/results.jsonl" ] && break
  sleep 0.05
done
scancel --signal=KILL --full "$job3" || true
wait_job "$job3"
rows=$(wc -l < "$tmp/arr/shard-3/results.jsonl")
echo "shard 3 killed after $rows of 6 rows"
[ "$rows" -lt 6 ] || fail "shard 3 finished before it was killed: not a test of the kill"
set +e
"$exe" sweep --merge "$tmp"/arr/shard-{1,2,3,4} --out "$tmp/partial" > "$tmp/partial.txt"; rc=$?
set -e
[ "$rc" -eq 1 ] || fail "merging an unfinished shard exited $rc, expected 1"
grep -q 'incomplete: .* plans have no row' "$tmp/partial.txt" || fail "no incomplete line: $(cat "$tmp/partial.txt")"
job3=$(sbatch --parsable --array=3 "$tmp/arr/slurm/sweep.sbatch")
wait_job "$job3"
"$exe" sweep --merge "$tmp"/arr/shard-{1,2,3,4} --out "$tmp/merged2" > /dev/null || fail "second merge exited $?"
cmp "$tmp/ref/results.jsonl" "$tmp/merged2/results.jsonl" || fail "rows lost or doubled after the kill and re-run"
python3 - "$tmp/merged2/results.jsonl" <<'PY'
import json, sys
ids = [json.loads(l)["plan"] for l in open(sys.argv[1])]
assert ids == list(range(24)), ids
PY

# 4. Bad input: exit 2, nothing written.
expect2() {
  local what=$1; shift
  set +e
  "$@" > "$tmp/out.txt" 2> "$tmp/err.txt"; local rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "$what: exit $rc, expected 2"
  [ -s "$tmp/err.txt" ] || fail "$what: no message"
  [ ! -s "$tmp/out.txt" ] || fail "$what: wrote to stdout: $(cat "$tmp/out.txt")"
  echo "$what: $(cat "$tmp/err.txt")"
}
expect2 "partition sbatch refuses" "$exe" sweep "$sweep" --slurm --partition no-such-partition --submit --out "$tmp/bad1"
[ ! -e "$tmp/bad1" ] || fail "a refused submission left $tmp/bad1"
grep -q 'sbatch refused' "$tmp/err.txt" || fail "the message does not say sbatch refused"
expect2 "shard 0 of 4" "$exe" sweep "$sweep" --shard 0/4 --out "$tmp/bad2"
expect2 "shard 5 of 4" "$exe" sweep "$sweep" --shard 5/4 --out "$tmp/bad3"
[ ! -e "$tmp/bad2" ] && [ ! -e "$tmp/bad3" ] || fail "a bad shard spec wrote a folder"
"$exe" sweep "$src/scenarios/sweeps/tensor3d-batch.json" --analytic --shard 1/4 --out "$tmp/other" > /dev/null
expect2 "shards of different sweeps" "$exe" sweep --merge "$tmp/arr/shard-1" "$tmp/other" --out "$tmp/bad4"
grep -q 'different sweep files' "$tmp/err.txt" || fail "the message does not name different sweep files"
[ ! -e "$tmp/bad4" ] || fail "a refused merge wrote $tmp/bad4"
echo "sweep_slurm: ok"
