#!/usr/bin/env python3
"""Measure exasim's kernels on an NVIDIA GPU (PyTorch: cuBLAS, cuDNN and PyTorch's own kernels).

Runs on the GPU machine, writes the measured time of every (kernel, precision, shape) of the grid
as JSON; `exasim calibrate --import-times FILE` turns the times into a kernel profile (rates from
exasim's own nominal work counts, class peaks, efficiency surfaces), so the work a kernel is credited
with is counted by the same code that costs it.

  python3 tools/calibrate-gpu.py --out times.json [--quick]
  python3 tools/calibrate-gpu.py --merge run1.json run2.json --out times.json

--merge keeps, per point, the faster of the runs that measured it at the same shape (the slower
carries the host's kernel-launch jitter: tiny kernels are launch-bound and vary run to run).

Each kernel is the operation the step graph names (kernels/kernel_id.hpp), written as PyTorch eager
code runs it: back-to-back launches of the same kernel on the same buffers, timed with CUDA events,
replayed from CUDA graphs (the kernels' own time, not Python's dispatch), in batches until the
relative standard error of the batch means is under 2 % (or 8 batches). Fused attention's forward
and backward run eagerly (autograd), each kernel long enough at these shapes that dispatch hides.
"fp16" is measured in bfloat16 (training precision bf16 and fp16 share the tensor-core rate).
A shape whose buffers would pass 2 GiB (24 GiB for a GEMM) is measured with its first dimension divided down and its
time scaled back up (its rate has saturated long before).
"""
import argparse, json, math, statistics, subprocess, sys, time

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # --merge needs no GPU
    torch = F = None

DT = {"fp16": "bfloat16", "fp32": "float32", "fp64": "float64"}
EB = {"fp16": 2, "fp32": 4, "fp64": 8, "fp8": 1}
MAX_BYTES = 2 * 2**30


def powers(a, b, f):
    v, x = [], a
    while x <= b * 1.0001:
        v.append(int(x)); x *= f
    return v


def grid(axes):
    out = [[]]
    for ax in axes:
        out = [s + [x] for s in out for x in ax]
    return out


def buffer_bytes(kernel, d, e):
    a, b, c = (d + [0, 0, 0])[:3]
    return {"gemm": (a * c + c * b + a * b) * e, "softmax": 2 * a * b * e, "layer_norm": 2 * a * b * e,
            "gelu": 2 * a * e, "residual_add": 3 * a * e, "gate_topk": a * b * e * 2,
            "token_permute": 2 * a * b * e, "adam": 16 * a, "im2col": 2 * a * b * c * e,
            "batch_norm": 2 * a * b * e, "pool": (a * b * c + a * b) * e}.get(kernel, 0)


def time_fn(fn, min_batch_s=0.02, target=0.02, max_batches=8, graph=True):
    """Mean seconds per call. The calls are captured n at a time in a CUDA graph and the graph
    replayed in timed batches (CUDA events), so the time is the kernels' own on the GPU: launched
    one by one from Python, a tiny kernel's rate would be the host's dispatch rate (about 10 us a
    call), which in a training step the host hides by running ahead of the GPU. graph=False (or a
    kernel that cannot be captured) times back-to-back eager launches."""
    fn(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); fn(); e.record(); torch.cuda.synchronize()
    one = max(s.elapsed_time(e) / 1e3, 1e-6)
    n = max(1, min(200, int(min_batch_s / one)))
    run, captured = None, False
    if graph:
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    fn()
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(n):
                    fn()
            run, captured = g.replay, True
        except Exception:
            torch.cuda.synchronize()
            run = None
    if run is None:
        def run():
            for _ in range(n):
                fn()
    run(); torch.cuda.synchronize()
    s.record(); run(); e.record(); torch.cuda.synchronize()
    reps = max(1, min(50, int(min_batch_s / max(s.elapsed_time(e) / 1e3, 1e-6))))
    means = []
    while True:
        s.record()
        for _ in range(reps):
            run()
        e.record(); torch.cuda.synchronize()
        means.append(s.elapsed_time(e) / 1e3 / (n * reps))
        if len(means) >= 3:
            m = statistics.mean(means)
            se = statistics.stdev(means) / math.sqrt(len(means)) / m
            if se < target or len(means) >= max_batches:
                return m, len(means) * n * reps, se, captured


def make(kernel, p, d):
    dev = "cuda"
    dt = getattr(torch, DT[p])
    a, b, c = (d + [0, 0, 0])[:3]
    if kernel == "gemm":
        A = torch.randn(a, c, device=dev, dtype=dt); B = torch.randn(c, b, device=dev, dtype=dt)
        C = torch.empty(a, b, device=dev, dtype=dt)
        return lambda: torch.matmul(A, B, out=C)
    if kernel == "softmax":
        x = torch.randn(a, b, device=dev, dtype=dt)
        return lambda: torch.softmax(x, dim=-1)
    if kernel == "layer_norm":
        x = torch.randn(a, b, device=dev, dtype=dt)
        w = torch.ones(b, device=dev, dtype=dt); bb = torch.zeros(b, device=dev, dtype=dt)
        return lambda: F.layer_norm(x, (b,), w, bb)
    if kernel == "gelu":
        x = torch.randn(a, device=dev, dtype=dt)
        return lambda: F.gelu(x, approximate="tanh")
    if kernel == "residual_add":
        x = torch.randn(a, device=dev, dtype=dt); y = torch.randn(a, device=dev, dtype=dt); z = torch.empty_like(x)
        return lambda: torch.add(x, y, out=z)
    if kernel == "gate_topk":
        x = torch.randn(a, b, device=dev, dtype=dt)
        k = min(c, b)
        return lambda: torch.topk(torch.softmax(x, dim=-1), k, dim=-1)
    if kernel == "token_permute":
        x = torch.randn(a, b, device=dev, dtype=dt)
        idx = torch.randperm(a, device=dev)
        y = torch.empty_like(x)
        return lambda: torch.index_select(x, 0, idx, out=y)
    if kernel == "adam":
        prm = torch.nn.Parameter(torch.randn(a, device=dev, dtype=torch.float32))
        prm.grad = torch.randn_like(prm)
        opt = torch.optim.Adam([prm], lr=1e-4, fused=True, capturable=True)
        opt.step()
        return opt.step
    if kernel == "im2col":
        x = torch.randn(a, b, device=dev, dtype=dt)
        idx = torch.randint(0, a, (a * c,), device=dev)
        y = torch.empty(a * c, b, device=dev, dtype=dt)
        return lambda: torch.index_select(x, 0, idx, out=y)
    if kernel == "batch_norm":
        x = torch.randn(a, b, device=dev, dtype=dt)
        w = torch.ones(b, device=dev, dtype=dt); bb = torch.zeros(b, device=dev, dtype=dt)
        return lambda: F.relu(F.batch_norm(x, None, None, w, bb, training=True), inplace=True)
    if kernel == "pool":
        x = torch.randn(a, c, b, device=dev, dtype=dt)
        return lambda: torch.amax(x, dim=1)
    raise ValueError(kernel)


def measure(kernel, p, shape, out):
    d = list(shape)
    scale = 1.0
    limit = 24 * 2**30 if kernel == "gemm" else MAX_BYTES  # a GEMM's operands all stay: only m is cut
    while buffer_bytes(kernel, d, EB[p]) > limit and d[0] > 1:
        d[0] //= 2; scale *= 2
    try:
        fn = make(kernel, p, d)
        t, iters, se, captured = time_fn(fn)
        del fn
        rec = {"kernel": kernel, "precision": p, "shape": list(shape), "measured_shape": d,
               "scale_factor": scale, "time_s": t * scale, "iterations": iters, "rel_stderr": se,
               "cuda_graph": captured}
    except Exception as ex:  # report, never invent
        rec = {"kernel": kernel, "precision": p, "shape": list(shape), "error": repr(ex)[:300]}
    out.append(rec)
    torch.cuda.empty_cache()


def flash(out, quick):
    """Fused attention: softmax(Q K^T) V of B x H pairs, seq x head_dim, forward and backward,
    causal and not, with each backend PyTorch offers (flash = FlashAttention-2, cudnn)."""
    from torch.nn.attention import sdpa_kernel, SDPBackend
    seqs = [512, 2048, 8192] if quick else [512, 1024, 2048, 4096, 8192, 16384]
    for backend_name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        for dh in (64, 128):
            for s in seqs:
                for causal in (False, True):
                    H = 16; B = max(1, 16384 // s)
                    rec = {"kernel": "flash_attention", "precision": "fp16", "backend": backend_name, "causal": causal,
                           "seq": s, "head_dim": dh, "pairs": B * H}
                    try:
                        q = torch.randn(B, H, s, dh, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                        k = torch.randn_like(q, requires_grad=True); v = torch.randn_like(q, requires_grad=True)
                        with sdpa_kernel([backend]):
                            fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            tf, _, sef, cf = time_fn(fwd)
                            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            g = torch.randn_like(o)
                            def fb():
                                oo = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                                torch.autograd.grad(oo, (q, k, v), g)
                            tfb, _, sefb, cfb = time_fn(fb, graph=False)
                        rec.update({"forward_s": tf, "forward_backward_s": tfb, "rel_stderr": max(sef, sefb)})
                    except Exception as ex:
                        rec["error"] = repr(ex)[:300]
                    out.append(rec)
                    torch.cuda.empty_cache()


def fp8(out):
    """Hopper FP8 GEMM (torch._scaled_mm, e4m3 inputs, bf16 output, per-tensor scales)."""
    for n in (1024, 4096, 8192, 16384):
        rec = {"kernel": "gemm", "precision": "fp8", "shape": [n, n, n]}
        try:
            a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
            b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
            one = torch.tensor(1.0, device="cuda")
            t, it, se, _ = time_fn(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
            rec.update({"time_s": t, "iterations": it, "rel_stderr": se, "measured_shape": [n, n, n], "scale_factor": 1.0})
        except Exception as ex:
            rec["error"] = repr(ex)[:300]
        out.append(rec)


def smi():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as ex:
        return repr(ex)


def point_key(r):
    return (r["kernel"], r["precision"], tuple(r.get("shape", [])), r.get("backend"), r.get("causal"),
            r.get("seq"), r.get("head_dim"))


def merge(files, out_path):
    runs = [json.load(open(f)) for f in files]
    best = {}
    order = []
    for run in runs:
        for r in run["times"]:
            k = point_key(r)
            if k not in best:
                order.append(k); best[k] = r; continue
            o = best[k]
            if "error" in o or ("time_s" in r and r.get("measured_shape") == o.get("measured_shape") and r["time_s"] < o["time_s"]):
                best[k] = r
            elif "forward_s" in r and "forward_s" in o and r["forward_backward_s"] < o["forward_backward_s"]:
                best[k] = r
            elif r.get("measured_shape") != o.get("measured_shape") and run is runs[-1]:
                best[k] = r  # measured differently: the last run's way (its script is the newer)
    meta = dict(runs[-1]["meta"])
    meta["merged_from"] = [dict(file=f, nvidia_smi_before=r["meta"].get("nvidia_smi_before"),
                                nvidia_smi_after=r["meta"].get("nvidia_smi_after")) for f, r in zip(files, runs)]
    with open(out_path + ".tmp", "w") as f:
        json.dump({"meta": meta, "times": [best[k] for k in order]}, f, indent=0)
    import os; os.replace(out_path + ".tmp", out_path)
    print(f"merged {len(files)} runs: {len(order)} points", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--merge", nargs="+", default=[])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    if args.merge:
        return merge(args.merge, args.out)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 (PyTorch's default since 1.12)
    torch.backends.cudnn.allow_tf32 = False
    t0 = time.time()
    g = powers(16, 16384, 4)
    rows = powers(64, 262144, 8); cols = powers(16, 16384, 4)
    n = powers(1024, 268435456, 4)
    pix = powers(64, 262144, 8); ch = powers(16, 4096, 4)
    axes = {"gemm": [g, g, g], "softmax": [rows, cols], "layer_norm": [rows, cols],
            "gate_topk": [rows, cols, [1, 2, 4]], "token_permute": [rows, powers(64, 16384, 4)],
            "im2col": [pix, ch, [1, 9, 49]], "pool": [pix, ch, [9, 49]], "batch_norm": [pix, ch],
            "gelu": [n], "residual_add": [n], "adam": [n]}
    if args.quick:
        axes = {"gemm": [[256, 4096], [256, 4096], [256, 4096]], "residual_add": [[2**20, 2**26]], "adam": [[2**26]]}
    meta = {"format": "exasim-kernel-times-1", "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "sms": torch.cuda.get_device_properties(0).multi_processor_count,
            "nvidia_smi_before": smi(), "axes": axes, "note": "fp16 measured in bfloat16"}
    out = []
    for kernel, ax in axes.items():
        if args.only and kernel not in args.only.split(","):
            continue
        for p in (["fp32"] if kernel == "adam" else ["fp16", "fp32", "fp64"]):
            for shape in grid(ax):
                measure(kernel, p, shape, out)
        print(f"{kernel}: done at {time.time() - t0:.0f} s", flush=True)
    if not args.only or "flash" in args.only:
        flash(out, args.quick); print(f"flash: done at {time.time() - t0:.0f} s", flush=True)
    if not args.only or "fp8" in args.only:
        fp8(out); print(f"fp8: done at {time.time() - t0:.0f} s", flush=True)
    meta["nvidia_smi_after"] = smi()
    meta["wall_s"] = time.time() - t0
    with open(args.out + ".tmp", "w") as f:
        json.dump({"meta": meta, "times": out}, f, indent=0)
    import os; os.replace(args.out + ".tmp", args.out)
    errs = [r for r in out if "error" in r]
    print(f"{len(out)} measurements, {len(errs)} errors, {meta['wall_s']:.0f} s", flush=True)
    for r in errs[:10]:
        print("ERROR", r)


if __name__ == "__main__":
    main()
