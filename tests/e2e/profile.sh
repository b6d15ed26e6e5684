#!/usr/bin/env bash
# End-to-end: compute costs come from a host profile. The shipped profile costs `run` and the
# report says so; another profile changes the prediction; bad profiles are refused clearly.
# Usage: profile.sh <exasim> <source dir>
set -euo pipefail
exe=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$exe" run moda-1024 --out "$tmp/a" > "$tmp/a.txt"
grep -q "compute costs .*host profile <embedded>/profiles/host-amd-epyc.json" "$tmp/a.txt" || fail "summary names no profile: $(cat "$tmp/a.txt")"

# A profile whose GEMMs reach half the efficiency everywhere: GEMM time doubles wherever the
# GEMMs are compute-bound, the step slows down.
python3 - "$src/profiles/host-amd-epyc.json" "$tmp/slow.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for k in p["kernels"]:
    if k["kernel"] == "gemm":
        for pt in k["points"]:
            pt["efficiency"] = min(pt["efficiency"], 1.0) / 2
json.dump(p, open(sys.argv[2], "w"))
PY
"$exe" run moda-1024 --profile "$tmp/slow.json" --out "$tmp/b" > /dev/null
python3 - "$tmp/a/report.json" "$tmp/b/report.json" "$tmp/slow.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert sys.argv[3] in b["cost_model"]["host_efficiency"], b["cost_model"]
assert b["step_time_s"] > a["step_time_s"], (a["step_time_s"], b["step_time_s"])
ga = next(c for c in a["cost_model"]["compute_by_kernel_class"] if c["kernel_class"] == "gemm")
gb = next(c for c in b["cost_model"]["compute_by_kernel_class"] if c["kernel_class"] == "gemm")
ratio = gb["time_s"] / ga["time_s"]
assert 1.5 < ratio <= 2.0 + 1e-9, ratio
# the other classes do not change
for c in a["cost_model"]["compute_by_kernel_class"]:
    if c["kernel_class"] != "gemm":
        d = next(x for x in b["cost_model"]["compute_by_kernel_class"] if x["kernel_class"] == c["kernel_class"])
        assert abs(d["time_s"] - c["time_s"]) <= 1e-12 * c["time_s"], (c, d)
        assert 0 < c["mean_efficiency"] <= 1, c
print(f"profile: GEMM time x{ratio:.3f}, step {a['step_time_s']:.6g} s -> {b['step_time_s']:.6g} s")
PY

# Bad profiles: exit 2, the file and the JSON path named, nothing written.
python3 - "$src/profiles/host-amd-epyc.json" "$tmp" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
q = json.loads(json.dumps(p)); del q["peaks"]["optimizer_update"]
json.dump(q, open(sys.argv[2] + "/no-class.json", "w"))
q = json.loads(json.dumps(p)); q["peaks"]["memory_bound"]["fp32"] = {"peak_GBps": 12}
json.dump(q, open(sys.argv[2] + "/bad-unit.json", "w"))
PY
for case in "no-class:/peaks/optimizer_update" "bad-unit:/peaks/memory_bound/fp32/peak_GBps"; do
  name=${case%%:*}; path=${case#*:}
  set +e
  "$exe" run moda-1024 --profile "$tmp/$name.json" --out "$tmp/out-$name" 2> "$tmp/err.txt"; rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "$name: exit $rc, expected 2"
  grep -q "$name.json" "$tmp/err.txt" || fail "$name: message names no file: $(cat "$tmp/err.txt")"
  grep -q "$path" "$tmp/err.txt" || fail "$name: message names no JSON path: $(cat "$tmp/err.txt")"
  [ ! -e "$tmp/out-$name" ] || fail "$name: output written for a bad profile"
done
set +e
"$exe" run moda-1024 --profile "$tmp/missing.json" --out "$tmp/out-missing" 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "missing.json" "$tmp/err.txt" || fail "missing profile: exit $rc, $(cat "$tmp/err.txt")"
# run --sample: the step's own shapes measured now, cached; a second run reuses the cache and
# reproduces the report byte for byte.
# --sample measures against this host's class peaks: on a CPU other than the shipped profile's,
# a quick calibration here provides them.
sample_profile=()
if ! grep -q "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["host"]["cpu_model"])' "$src/profiles/host-amd-epyc.json")" /proc/cpuinfo; then
  "$exe" calibrate --quick --out "$tmp/host.json" > /dev/null
  sample_profile=(--profile "$tmp/host.json")
fi
XDG_CACHE_HOME="$tmp/cache" "$exe" run moda-1024 --sample "${sample_profile[@]}" --out "$tmp/s1" > "$tmp/s1.txt"
grep -q "kernels sampled on this host" "$tmp/s1.txt" || fail "--sample: $(cat "$tmp/s1.txt")"
[ -s "$tmp/cache/exasim/samples.json" ] || fail "--sample wrote no cache"
XDG_CACHE_HOME="$tmp/cache" "$exe" run moda-1024 --sample "${sample_profile[@]}" --out "$tmp/s2" > /dev/null
cmp "$tmp/s1/report.json" "$tmp/s2/report.json" || fail "--sample with a warm cache is not reproducible"
echo "profile.sh: ok"
