#!/usr/bin/env bash
# End-to-end on the gpu_cluster family: Megatron's GPT 1.7B on Selene (analytic) and a small GPT
# on two DGX A100 nodes (simulated, folded and exhaustive): exit 0, a positive step time, the
# report's machine object with the family's fields, and folding that agrees with the full run;
# and the same small GPT on a TPU v3 pod (torus family).
set -euo pipefail
exe=$1; src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src"
"$exe" run scenarios/megatron/gpt-1.7b.json --analytic --out "$tmp/a" > /dev/null
"$exe" run scenarios/gpt-small-dgx-a100.json --out "$tmp/f" > /dev/null
"$exe" run scenarios/gpt-small-dgx-a100.json --fidelity exhaustive --out "$tmp/x" > /dev/null
# The torus family: the same small GPT on 16 chips of the TPU v3 pod (tensor 4 along a row, data 4).
python3 - "$tmp/tpu.json" <<'PY'
import json, sys
s = json.load(open("scenarios/gpt-small-dgx-a100.json"))
s["name"], s["machine"] = "gpt-small-tpu", "tpu-v3-pod"
s["plan"].update({"data_parallel": 4, "tensor_parallel": 4})
json.dump(s, open(sys.argv[1], "w"))
PY
"$exe" run "$tmp/tpu.json" --out "$tmp/t" > /dev/null
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
a, f, x = (json.load(open(f"{d}/{k}/report.json")) for k in "afx")
for r in (a, f, x):
    assert r["step_time_s"] > 0, r["step_time_s"]
    m = r["machine"]
    assert m["family"] == "gpu_cluster" and m["gpus_per_node"] == 8 and m["nic_Bps"] == 25e9, m
    assert m["devices"] == 3072 and m["device_word"] == "GPU", m
assert a["sim"]["fidelity"] == "analytic" and a["plan"]["devices"] == 32
assert f["plan"]["devices"] == 16 and f["sim"]["fidelity"] == "folded" and x["sim"]["fidelity"] == "exhaustive"
assert abs(f["step_time_s"] - x["step_time_s"]) <= 1e-6 * x["step_time_s"], (f["step_time_s"], x["step_time_s"])
t = json.load(open(f"{d}/t/report.json"))
assert t["step_time_s"] > 0 and t["plan"]["devices"] == 16, t["step_time_s"]
assert t["machine"]["family"] == "torus" and t["machine"]["torus_x"] == 32 and t["machine"]["device_word"] == "chip", t["machine"]
print("e2e gpu: ok", a["step_time_s"], f["step_time_s"], t["step_time_s"])
PY
