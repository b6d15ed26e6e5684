#!/usr/bin/env bash
# End-to-end: outputs are written whole or not at all (issue 11). Twenty concurrent pairs of
# `exasim run` into one --out leave a valid report every time (each process stages its files under
# its own temporary names); a failing --trace leaves no report written; a failed write names the
# OS error and leaves no temporary file. Usage: outputs.sh <exasim> <source dir>
set -euo pipefail
exe=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
scenario=$src/tests/data/tiny-gpt-2-nodes.json

# 1. Twenty rounds of two concurrent runs into one folder: both exit 0 and report.json is whole.
"$exe" run "$scenario" --out "$tmp/ref" > /dev/null
for round in $(seq 1 20); do
  "$exe" run "$scenario" --out "$tmp/shared" > "$tmp/a.txt" 2>&1 & a=$!
  "$exe" run "$scenario" --out "$tmp/shared" > "$tmp/b.txt" 2>&1 & b=$!
  wait $a || fail "round $round: the first run failed: $(cat "$tmp/a.txt")"
  wait $b || fail "round $round: the second run failed: $(cat "$tmp/b.txt")"
  cmp -s "$tmp/ref/report.json" "$tmp/shared/report.json" || fail "round $round: report.json torn or different"
  python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$tmp/shared/runstats.json" ||
    fail "round $round: runstats.json is not valid JSON"
done
leftovers=$(find "$tmp/shared" -name '.*' -type f)
[ -z "$leftovers" ] || fail "temporary files left behind: $leftovers"

# 2. A --trace that cannot be written (its folder would sit under a regular file): exit 2 before the
#    simulation, the OS error in the message, and neither report.json nor runstats.json written.
touch "$tmp/a-file"
set +e
"$exe" run "$scenario" --out "$tmp/t" --trace "$tmp/a-file/trace.json" > /dev/null 2> "$tmp/trace.err"; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "an unwritable --trace exited $rc, expected 2: $(cat "$tmp/trace.err")"
grep -q "Not a directory" "$tmp/trace.err" || fail "no OS error in the message: $(cat "$tmp/trace.err")"
[ ! -e "$tmp/t/report.json" ] && [ ! -e "$tmp/t/runstats.json" ] || fail "report written although the trace failed"

# ... nor a --trace that names a folder (rename would refuse it after the report was in place).
mkdir "$tmp/a-dir"
set +e
"$exe" run "$scenario" --out "$tmp/t" --trace "$tmp/a-dir" > /dev/null 2> "$tmp/trace-dir.err"; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "a --trace naming a folder exited $rc, expected 2: $(cat "$tmp/trace-dir.err")"
grep -q "Is a directory" "$tmp/trace-dir.err" || fail "no OS error in the message: $(cat "$tmp/trace-dir.err")"
[ ! -e "$tmp/t" ] || fail "report folder written although the trace failed"

# 3. An unwritable --out: exit 2, the OS error named, nothing left behind.
chmod 500 "$tmp/ref"
if [ "$(id -u)" -ne 0 ]; then
  set +e
  "$exe" run "$scenario" --out "$tmp/ref" > /dev/null 2> "$tmp/ro.err"; rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "a read-only --out exited $rc, expected 2"
  grep -q "Permission denied" "$tmp/ro.err" || fail "no OS error in the message: $(cat "$tmp/ro.err")"
fi
chmod 700 "$tmp/ref"
set +e
"$exe" run "$scenario" --out "$tmp/a-file/out" > /dev/null 2> "$tmp/out.err"; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "an --out under a regular file exited $rc, expected 2"
grep -q "Not a directory" "$tmp/out.err" || fail "no OS error in the message: $(cat "$tmp/out.err")"
echo "e2e outputs: ok"
