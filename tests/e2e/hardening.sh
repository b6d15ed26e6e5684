#!/usr/bin/env bash
# End-to-end: hostile or careless input is refused with exit status 2, a message naming the file,
# the JSON path (or line) and what was expected, nothing written, and at once (no crash, no hang,
# no minute of building a graph that cannot fit). Reproducers of issue 11 in tests/data/hardening/.
# Usage: hardening.sh <exasim> <source dir>
set -euo pipefail
exe=$(cd "$(dirname "$1")" && pwd)/$(basename "$1"); src=$(cd "$2" && pwd)
data=$src/tests/data/hardening
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Every check runs (and reports) even after one fails: the script exits 1 at the end.
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# refused NAME PATTERN... -- ARGS: `exasim ARGS` exits 2 within 60 s (a hang is a failure), its
# message matches every PATTERN, and nothing is written under $tmp/out-NAME.
refused() {
  local name=$1; shift
  local patterns=()
  while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  local rc=0
  timeout 60 "$exe" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err" || rc=$?
  [ "$rc" -eq 2 ] || { fail "$name: exited $rc, expected 2: $(tail -3 "$tmp/$name.err")"; return 0; }
  for p in "${patterns[@]}"; do
    grep -q -- "$p" "$tmp/$name.err" || { fail "$name: message lacks '$p': $(cat "$tmp/$name.err")"; return 0; }
  done
  [ ! -e "$tmp/out-$name" ] || [ -z "$(ls -A "$tmp/out-$name")" ] || fail "$name: output written"
}

# Counts: data x tensor x pipeline = 2^63 overflowed 64 bits and crashed (SIGSEGV); a Sunway
# machine of 2^31 - 1 supernodes reported -256 devices.
refused devices-overflow "plan-devices-overflow.json" "/plan" "2097152 x 2097152 x 2097152" -- \
  run "$data/plan-devices-overflow.json" --out "$tmp/out-devices-overflow"
refused supernodes-overflow "sunway-supernodes-overflow.json" "/machine/supernodes" "2147483647 devices" -- \
  run "$data/sunway-supernodes-overflow.json" --out "$tmp/out-supernodes-overflow"

# Machine numbers checked for their meaning: SimGrid aborted (1e-320 B/s), crashed (1e308 s) or
# hung (1e300 s) on these.
refused bandwidth "/machine/node_injection_Bps" "between 1e+06 and 1e+15 B/s" "got 1e-320" -- \
  run "$data/bandwidth-1e-320.json" --out "$tmp/out-bandwidth"
refused latency-1e308 "/machine/link_latency_s" "1 ps to 1 s" -- \
  run "$data/latency-1e308.json" --out "$tmp/out-latency-1e308"
refused latency-1e300 "/machine/link_latency_s" "1 ps to 1 s" -- \
  run "$data/latency-1e300.json" --out "$tmp/out-latency-1e300"

# The step graph's size is estimated before it is built: 10^9 ranks or 2^31 - 1 layers are refused
# at once (they used to grow to gigabytes and die of bad_alloc).
refused billion-ranks "billion-ranks.json" "/plan" "ops x ranks" "1e+09 ranks" "--max-graph-ops" -- \
  run "$data/billion-ranks.json" --out "$tmp/out-billion-ranks"
refused huge-layers "huge-layers.json" "/plan" "ops x ranks" "--max-graph-ops" -- \
  run "$data/huge-layers.json" --out "$tmp/out-huge-layers"
refused graph-flag "--max-graph-ops" -- run "$data/huge-layers.json" --max-graph-ops nope

# fp16 on a device without fp16 figures: refused while the scenario is read (was exit 1 at run time).
refused fp16-device "fp16-without-fp16-device.json" "/training/precision" "peak_flops_per_s.fp16" -- \
  run "$data/fp16-without-fp16-device.json" --out "$tmp/out-fp16-device"
# ... and on a host profile without fp16 figures (no fp16 surfaces, no stand-in for them).
python3 - "$src/profiles/host-amd-epyc.json" "$tmp/no-fp16-profile.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
del p["stand_ins"]
json.dump(p, open(sys.argv[2], "w"))
PY
refused fp16-profile "no-fp16-profile.json" "/kernels" "at fp16" -- \
  run "$src/tests/data/small-gpt-sunway-16.json" --profile "$tmp/no-fp16-profile.json" --out "$tmp/out-fp16-profile"

# Numbers past double's range (1e400) name their file: the sweep file, its base scenario, a host profile.
sed 's/"global_batch": 1024/"global_batch": 1e400/' "$src/tests/data/small-gpt-sunway-16.json" > "$tmp/base-1e400.json"
printf '{"name": "s", "base": "base-1e400.json", "dimensions": {"/plan/micro_batch": [1, 2]}}' > "$tmp/sweep-base-1e400.json"
refused sweep-base-1e400 "base-1e400.json" "1e400" -- sweep "$tmp/sweep-base-1e400.json" --out "$tmp/out-sweep-base-1e400"
printf '{"name": "s", "base": "%s", "dimensions": {"/plan/micro_batch": [1, 1e400]}}' \
  "$src/tests/data/small-gpt-sunway-16.json" > "$tmp/sweep-1e400.json"
refused sweep-1e400 "sweep-1e400.json" "1e400" -- sweep "$tmp/sweep-1e400.json" --out "$tmp/out-sweep-1e400"
sed 's/"blas_threads": 1/"blas_threads": 1e400/' "$src/profiles/host-amd-epyc.json" > "$tmp/profile-1e400.json"
grep -q 1e400 "$tmp/profile-1e400.json" || fail "the profile reproducer lacks 1e400"
refused profile-1e400 "profile-1e400.json" "1e400" -- run "$src/tests/data/tiny-gpt-2-nodes.json" \
  --profile "$tmp/profile-1e400.json" --out "$tmp/out-profile-1e400"
# A profile's counts are range-checked before conversion (1e300 iterations was undefined behaviour).
sed 's/"blas_threads": 1/"blas_threads": 1e300/' "$src/profiles/host-amd-epyc.json" > "$tmp/profile-1e300.json"
refused profile-1e300 "profile-1e300.json" "/host/blas_threads" "whole number from 1 to" -- \
  run "$src/tests/data/tiny-gpt-2-nodes.json" --profile "$tmp/profile-1e300.json" --out "$tmp/out-profile-1e300"

# sweep --resume continues only the sweep that wrote the folder: rows of another base scenario with
# the same dimensions are refused (the folder's sweep.json holds a fingerprint of base and dimensions).
sed 's/"name": "tiny-gpt-2-nodes"/"name": "base-a"/' "$src/tests/data/tiny-gpt-2-nodes.json" > "$tmp/base-a.json"
sed 's/"seq_len": 128/"seq_len": 256/' "$tmp/base-a.json" > "$tmp/base-b.json"
for b in a b; do
  printf '{"name": "s", "base": "base-%s.json", "dimensions": {"/plan/micro_batch": [1, 2]}}' $b > "$tmp/sweep-$b.json"
done
"$exe" sweep "$tmp/sweep-a.json" --out "$tmp/sw" > /dev/null || fail "the small sweep failed"
refused resume-other-base "sweep.json" "/fingerprint" "another sweep" -- sweep "$tmp/sweep-b.json" --out "$tmp/sw" --resume
"$exe" sweep "$tmp/sweep-a.json" --out "$tmp/sw" --resume > /dev/null || fail "resuming the same sweep failed"
# A row with a number past double's range in results.jsonl: refused naming the file and the line.
cp -r "$tmp/sw" "$tmp/sw-1e400"
head -1 "$tmp/sw/results.jsonl" > "$tmp/sw-1e400/results.jsonl"
echo '{"plan":1,"status":"ok","step_time_s":1e400}' >> "$tmp/sw-1e400/results.jsonl"
refused resume-1e400 "results.jsonl" "line 2" "1e400" -- sweep "$tmp/sweep-a.json" --out "$tmp/sw-1e400" --resume

# Command-line arguments: `run ''` is an error, not the default scenario; `list` takes no argument.
refused run-empty "empty argument" -- run "" --out "$tmp/out-run-empty"
refused list-arg "takes no argument" -- list bogus

# calibrate finds an unwritable --out before measuring (here a path under a regular file).
touch "$tmp/a-file"
refused calibrate-out "a-file" "Not a directory" -- calibrate --quick --out "$tmp/a-file/profile.json"
if grep -q "calibrate: " "$tmp/calibrate-out.err"; then fail "calibrate measured before checking --out"; fi

# calibrate --threads is range-checked before conversion (atoi of 99999999999 was undefined).
refused calibrate-threads "--threads" "from 1 to 65536" -- calibrate --quick --threads 99999999999 --out "$tmp/out-t/p.json"
refused calibrate-threads-0 "--threads" -- calibrate --quick --threads 0 --out "$tmp/out-t0/p.json"

# The default output folder is built from the scenario's name, sanitized: "../.." stays in out/.
mkdir -p "$tmp/work/deep"
(cd "$tmp/work/deep" && "$exe" run "$data/name-dotdot.json" > /dev/null 2>&1) || fail "name-dotdot did not run"
[ ! -e "$tmp/work/report.json" ] && [ ! -e "$tmp/report.json" ] || fail "a scenario's name wrote outside out/"
[ -f "$tmp/work/deep/out/_.._../report.json" ] || fail "no report in out/_.._..: $(find "$tmp/work" -name report.json)"

# The default host profile is the embedded one, whatever file of that name the working directory holds.
mkdir -p "$tmp/work/profiles"
echo 'not a profile' > "$tmp/work/profiles/host-amd-epyc.json"
(cd "$tmp/work" && "$exe" run "$src/tests/data/tiny-gpt-2-nodes.json" --out "$tmp/cwd-profile" > /dev/null 2> "$tmp/cwd.err") ||
  fail "a profiles/host-amd-epyc.json in the working directory replaced the embedded default: $(cat "$tmp/cwd.err")"
[ "$failures" -eq 0 ] || { echo "e2e hardening: $failures check(s) failed"; exit 1; }
echo "e2e hardening: ok"
