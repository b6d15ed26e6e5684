#!/usr/bin/env bash
# End-to-end: the closed-form estimate run in the sweep's own process (the default of
# `exasim sweep --analytic`) gives, for every plan of every shipped sweep (scenarios/sweeps/),
# exactly the row that a forked process per plan gives (--isolate, as every sweep ran before):
# same status, same reason, same numbers, byte for byte (the GPT-3 175B sweeps at global batch 512,
# every 16th plan of the search sweep; see below). Plans the memory model rules out are
# pruned before their graphs are built in both, so the infeasible rows' numbers are compared too.
# Usage: sweep_inprocess.sh <exasim> <source dir>
set -euo pipefail
exe=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
n=0
for f in "$src"/scenarios/sweeps/*.json; do
  name=$(basename "$f" .json)
  # The two GPT-3 175B sweeps (their plans are most of the test's time) run as their copies in
  # tests/data at global batch 512: the same plans, kernel shapes and invalid plans, a third of the
  # micro-batches, so a third of the graphs (the in-process state that could leak from plan to plan,
  # the memoized efficiencies, is keyed on kernel shapes, which the batch does not change).
  small="$src/tests/data/sweep-$name-batch-512.json"
  [ -f "$small" ] && { f=$small; name=$name-batch-512; }
  # A "search" sweep (hundreds of plans): a sample, its first of 16 disjoint shards (every 16th
  # plan), so that the test stays short on a 2-core CI; every grid sweep is compared whole.
  sample=()
  if grep -q '"search"' "$f"; then sample=(--shard 1/16); fi
  "$exe" sweep "$f" --analytic --jobs 2 "${sample[@]}" --out "$tmp/$name-in" > "$tmp/$name-in.txt" || fail "$name: in-process exited $?"
  "$exe" sweep "$f" --analytic --isolate --jobs 2 "${sample[@]}" --out "$tmp/$name-fork" > /dev/null || fail "$name: --isolate exited $?"
  cmp "$tmp/$name-in/results.jsonl" "$tmp/$name-fork/results.jsonl" || fail "$name: rows differ"
  rows=$(wc -l < "$tmp/$name-in/results.jsonl")
  ok=$(grep -c '"status":"ok"' "$tmp/$name-in/results.jsonl" || true)
  echo "$name: $rows plans ($ok ok), the same rows in-process and per process"
  n=$((n + rows))
done
[ "$n" -ge 600 ] || fail "only $n plans compared"
