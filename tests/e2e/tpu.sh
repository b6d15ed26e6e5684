#!/usr/bin/env bash
# End-to-end on TPU pods: ResNet-50 on the 1,024-chip pod (model FLOPs against the hand count,
# images per second = global batch / step time, memory parts summing to the total), the
# gradient all-reduce of ResNet-50 on a 4 x 4 torus against the 2-D torus closed form, and bad
# convolutional input refused with its JSON path and exit status 2, nothing written.
set -euo pipefail
exe=$1; src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src"
"$exe" run scenarios/tpu/resnet50-tpu-v3-1024.json --out "$tmp/pod" > /dev/null
# 16 chips on a 4 x 4 torus (83 GB/s links, 1 us a hop), 64 images each, one replica per chip.
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
s = json.load(open("scenarios/tpu/resnet50-tpu-v3-1024.json"))
m = json.load(open("topologies/machines/tpu-v3-pod.json"))
m.update({"torus_x": 4, "torus_y": 4, "name": "tpu-v3-4x4"})
s.update({"name": "resnet50-4x4", "machine": m})
s["plan"] = {"devices": 16, "global_batch": 1024}
json.dump(s, open(f"{d}/small.json", "w"))
bad = dict(s)
bad["model"] = dict(s["model"], layers=24)
json.dump(bad, open(f"{d}/bad-transformer-key.json", "w"))
gpt = json.load(open("scenarios/gpt-small-dgx-a100.json"))
gpt["model"]["stages"] = [3, 4, 6, 3]
json.dump(gpt, open(f"{d}/bad-cnn-key.json", "w"))
bn = dict(s, plan={"devices": 16, "global_batch": 1024, "batch_norm_group": 3})
json.dump(bn, open(f"{d}/bad-bn-group.json", "w"))
tile = dict(s, plan={"devices": 16, "global_batch": 1024, "batch_norm_group": 4, "batch_norm_tile": [3, 1]})
json.dump(tile, open(f"{d}/bad-bn-tile.json", "w"))
gpu_tile = json.load(open("scenarios/tpu/resnet50-tpu-v3-1024.json"))
gpu_tile["machine"] = "selene-dgx-a100"
gpu_tile["plan"] = {"devices": 16, "global_batch": 1024, "batch_norm_tile": [2, 2]}
json.dump(gpu_tile, open(f"{d}/bad-bn-tile-machine.json", "w"))
big = dict(s, plan={"devices": 32, "global_batch": 1024})
json.dump(big, open(f"{d}/bad-devices.json", "w"))
dev = json.load(open("topologies/devices/tpu-v3.json"))
mxu = dict(s, machine=dict(m, device=dict(dev, matrix_unit={"rows": 128, "columns": 0})))
json.dump(mxu, open(f"{d}/bad-matrix-unit.json", "w"))
PY
"$exe" run "$tmp/small.json" --out "$tmp/small" > /dev/null
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
r = json.load(open(f"{d}/pod/report.json"))
assert r["model"]["family"] == "resnet" and r["model"]["parameters"] == 25557032, r["model"]
# forward, data and weight gradients of every GEMM; the stem (7 x 7 x 3 -> 112 x 112 x 64) has no data gradient
macs = 4089184256
want = 65536 * 2 * (3 * macs - 112 * 112 * 64 * 147)
assert abs(r["model_flops"] - want) <= 1e-9 * want, (r["model_flops"], want)
assert abs(r["images_per_s"] - 65536 / r["step_time_s"]) <= 1e-9 * r["images_per_s"], r["images_per_s"]
assert r["tokens_per_s"] == 0
assert r["plan"] == {"devices": 1024, "global_batch": 65536, "images_per_device": 64, "cores_per_device": 2,
                     "weight_update_sharding": False, "batch_norm_group": 1}, r["plan"]
mem = r["memory_per_device_bytes"]
parts = ["parameters", "gradients", "optimizer_state", "activations", "embedding_logits", "communication_buffers"]
assert abs(mem["total"] - sum(mem[k] for k in parts)) <= 1e-9 * mem["total"], mem
# The gradient all-reduce on 4 x 4 (after the backward pass, not overlapped): 2-D torus, bidirectional
# rings: 2 x 3 row steps of B/4/2 and 2 x 3 column steps of B/16/2, each a hop of 1 us.
s = json.load(open(f"{d}/small/report.json"))
B, link, hop = 4 * 25557032, 83e9, 1e-6
closed = 6 * (hop + B / 4 / 2 / link) + 6 * (hop + B / 16 / 2 / link)
got = s["breakdown"]["backward_communication"]["seconds"]
assert abs(got - closed) <= 1e-6 * closed, (got, closed)
print("e2e tpu: ok", r["images_per_s"], r["step_time_s"], got, closed)
PY
# Bad input: exit 2, the file and the JSON path named, no output folder.
check_bad() {  # file, expected path
  set +e
  "$exe" run "$tmp/$1" --out "$tmp/out-$1" > "$tmp/err" 2>&1
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || { echo "$1: exit $rc, expected 2"; cat "$tmp/err"; exit 1; }
  grep -q "$1" "$tmp/err" && grep -q "$2" "$tmp/err" || { echo "$1: message lacks $2"; cat "$tmp/err"; exit 1; }
  [ ! -e "$tmp/out-$1" ] || { echo "$1: output written"; exit 1; }
}
check_bad bad-transformer-key.json /model/layers
check_bad bad-cnn-key.json /model/stages
check_bad bad-bn-group.json /plan/batch_norm_group
check_bad bad-bn-tile.json /plan/batch_norm_tile
check_bad bad-bn-tile-machine.json /plan/batch_norm_tile
check_bad bad-devices.json /plan/devices
check_bad bad-matrix-unit.json /machine/device/matrix_unit/columns
# The families' bad input: a torus slice whose shape is not the plan's device count, or outside
# the pod; an MoE stride that does not divide the layers; a stride on a dense model; BERT's heads
# on a decoder; decoder layers without the encoder-decoder architecture; GShard's group size that
# does not divide a device's tokens, or on a dense model; a capacity rule without groups.
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
g = json.load(open("scenarios/tpu/gshard-moe-128e-12l-128cores.json"))
def write(name, doc):
    json.dump(doc, open(f"{d}/{name}", "w"))
write("bad-slice-shape.json", dict(g, plan=dict(g["plan"], slice=[8, 4])))
write("bad-slice-size.json", dict(g, plan=dict(g["plan"], slice=[64, 1])))
write("bad-moe-every.json", dict(g, model=dict(g["model"], moe_every=4)))
dense = {k: v for k, v in g["model"].items() if k not in ("experts_per_layer", "top_k", "capacity_factor", "group_size", "capacity_rule")}
write("bad-moe-every-dense.json", dict(g, model=dense, plan=dict(g["plan"], expert_parallel=1)))
write("bad-group-size.json", dict(g, model=dict(g["model"], group_size=1000)))
write("bad-capacity-rule.json", dict(g, model=dict({k: v for k, v in g["model"].items() if k != "group_size"}, capacity_rule="lingvo")))
write("bad-group-size-dense.json", dict(g, model=dict({k: v for k, v in dense.items() if k != "moe_every"}, group_size=2048), plan=dict(g["plan"], expert_parallel=1)))
gpt = json.load(open("scenarios/gpt-small-dgx-a100.json"))
write("bad-masked-fraction.json", dict(gpt, model=dict(gpt["model"], masked_fraction=0.15)))
write("bad-decoder-layers.json", dict(gpt, model=dict(gpt["model"], decoder_layers=4)))
write("bad-gpu-slice.json", dict(gpt, plan=dict(gpt["plan"], slice=[4, 4])))
# fp32 attention logits under fp32 activations change nothing (refused); a one-hot lookup needs a vocab
bert = json.load(open("scenarios/tpu/bert-large-lamb-1024-seq128.json"))
write("bad-attention-logits.json", dict(bert, training=dict(bert["training"], attention_logits_precision="fp32")))
novocab = {k: v for k, v in bert["model"].items() if k not in ("vocab", "masked_fraction", "next_sentence")}
write("bad-embedding-lookup.json", dict(bert, model=dict(novocab, architecture="decoder")))
# per-tensor all-reduces (CrossShardOptimizer) need whole tensors on every replica
write("bad-per-tensor.json", dict(bert, training=dict(bert["training"], grad_sync="per_tensor"),
                                  plan=dict(bert["plan"], data_parallel=512, tensor_parallel=2)))
resnet = json.load(open("scenarios/tpu/resnet50-mlperf-v07-4096.json"))
write("bad-per-tensor-sharded.json", dict(resnet, training=dict(resnet["training"], grad_sync="per_tensor")))
PY
check_bad bad-slice-shape.json /plan/slice
check_bad bad-slice-size.json /plan/slice
check_bad bad-moe-every.json /model/moe_every
check_bad bad-moe-every-dense.json /model/moe_every
check_bad bad-group-size.json /model/group_size
check_bad bad-group-size-dense.json /model/group_size
check_bad bad-capacity-rule.json /model/capacity_rule
check_bad bad-masked-fraction.json /model/masked_fraction
check_bad bad-decoder-layers.json /model/decoder_layers
check_bad bad-gpu-slice.json /plan/slice
check_bad bad-attention-logits.json /training/attention_logits_precision
check_bad bad-embedding-lookup.json /model/embedding_lookup
check_bad bad-per-tensor.json /training/grad_sync
check_bad bad-per-tensor-sharded.json /training/grad_sync

set +e; "$exe" run "$tmp/bad-slice-shape.json" --out "$tmp/x" > "$tmp/err" 2>&1; set -e
grep -q "expected a torus shape of the plan's 64 devices, got 8 x 4 = 32" "$tmp/err" || { cat "$tmp/err"; exit 1; }
echo "e2e tpu: bad input ok"
