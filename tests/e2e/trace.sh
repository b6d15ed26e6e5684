#!/usr/bin/env bash
# End-to-end: `run --trace` writes a Chrome trace: one track per simulated rank with one slice per
# op of its program, the collective's bytes as derived by hand, and a small file for the
# 96,000-node default scenario.
# Usage: trace.sh <exasim> <source dir>
set -euo pipefail
exe=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$exe" run "$src/tests/data/tiny-gpt-2-nodes.json" --fidelity exhaustive --out "$tmp/o" --trace "$tmp/t/trace.json" > "$tmp/o.txt"
python3 - "$tmp/t/trace.json" "$tmp/o/report.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1])); rep = json.load(open(sys.argv[2]))
ev = t["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
assert sorted(names) == [0, 1], names
assert all("stands for 1," in n for n in names.values()), names
x = [e for e in ev if e["ph"] == "X"]
# One layer of a dense GPT: per rank 42 compute ops (embedding, 1 layer's forward and backward with
# the scores' dropout each way, logits, loss, final layer norm, Adam) and one gradient all-reduce.
for pid in (0, 1):
    mine = [e for e in x if e["pid"] == pid]
    assert sum(e["cat"] == "compute" for e in mine) == 42, len(mine)
    ar = [e for e in mine if e["cat"] == "collective"]
    assert len(ar) == 1 and ar[0]["name"] == "grad_all_reduce", ar
    # Parameters (Megatron Eq. 2, l=1, h=256, V=1024, s=128): 12 h^2 + 13 h + (V + s) h = 1,084,672,
    # 4 bytes each in fp32.
    assert ar[0]["args"]["bytes"] == 1084672 * 4, ar[0]["args"]
    assert ar[0]["args"]["kind"] == "all_reduce" and ar[0]["args"]["group"] == "dp"
    # A ring all-reduce of 2 ranks moves B bytes per rank: at least B / injection bandwidth.
    assert ar[0]["dur"] * 1e-6 >= 1084672 * 4 / rep["machine"]["node_injection_Bps"], ar[0]
    adam = next(e for e in mine if e["name"] == "adam")
    assert adam["ts"] >= ar[0]["ts"] + ar[0]["dur"] - 1e-6, (adam, ar[0])
    end = max(e["ts"] + e["dur"] for e in mine) * 1e-6
    assert abs(end - rep["step_time_s"]) <= 1e-9 * rep["step_time_s"] + 1e-12, (end, rep["step_time_s"])
    # slices of one thread never overlap (overlapping ops get lanes of their own)
    by_tid = {}
    for e in sorted(mine, key=lambda e: e["ts"]):
        last = by_tid.get(e["tid"], -1)
        assert e["ts"] >= last - 1e-6, e
        by_tid[e["tid"]] = e["ts"] + e["dur"]
print("trace: 2 tracks, 41 slices each, all-reduce", ar[0]["dur"], "us")
PY
# Same input, same bytes.
"$exe" run "$src/tests/data/tiny-gpt-2-nodes.json" --fidelity exhaustive --out "$tmp/o2" --trace "$tmp/t/trace2.json" > /dev/null
cmp "$tmp/t/trace.json" "$tmp/t/trace2.json" || fail "the trace is not deterministic"
# The 96,000-node default scenario: one track per simulated representative, a small file.
"$exe" run --out "$tmp/big" --trace "$tmp/big.json" > /dev/null
python3 - "$tmp/big.json" "$tmp/big/report.json" <<'PY'
import json, os, sys
t = json.load(open(sys.argv[1])); rep = json.load(open(sys.argv[2]))
size = os.path.getsize(sys.argv[1])
assert size < 20e6, size
procs = [e for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
assert len(procs) == rep["sim"]["simulated_ranks"], (len(procs), rep["sim"])
stands = sum(int(p["args"]["name"].split("stands for ")[1].split(",")[0]) for p in procs)
assert stands == 96000, stands
print(f"trace: 96,000-node scenario, {len(procs)} tracks, {size / 1e6:.2f} MB")
PY
echo "trace.sh: ok"
