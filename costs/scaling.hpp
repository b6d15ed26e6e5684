// Shapes too large for this host are sampled scaled down, and their time extrapolated:
// time(full shape) = time(scaled shape) * factor.
//
// The rule scales along the dimension that keeps the kernel in the same regime:
//
// GEMM (fits: nominal flops <= max_flops and nominal bytes <= max_bytes):
//   1. the batch, down to 1;
//   2. then the largest of m, n, k alone, down to the middle one;
//   3. then the two largest together (kept equal), down to the smallest one;
//   4. then, only if the smallest one is itself too large, all three together.
//   The smallest of m, n, k is never scaled before step 4 and nothing goes below it: the skinny
//   dimension decides a GEMM's efficiency regime (a GEMM with a skinny side is bandwidth-bound,
//   one with no skinny side compute-bound), and step 4 only happens when even the cube of the
//   smallest dim is over the limits, i.e. when the GEMM is compute-bound at any of its sizes.
//   Scaling the largest dims first also keeps the packing overhead (1/m + 1/n + 1/k) closest to the
//   full shape's. factor = the ratio of nominal flops.
//
// Memory-bound kernels (softmax, layer_norm, gelu, residual_add, gate_topk, token_permute, adam):
//   only the first dim (rows, tokens or elements) is scaled, never the row length (cols, d_model,
//   experts and k), which decides the per-row overhead; down to the largest size with nominal
//   bytes <= max_bytes, but not below min_bytes, which keeps the buffers well out of the caches,
//   in the DRAM-bound regime of the full shape. factor = the ratio of nominal bytes.
//
// A shape within the limits is returned unchanged, with factor 1 (this includes memory-bound
// shapes under min_bytes: they are never scaled up). Scaled dims are rounded down to a multiple
// of 8 when 64 or more, unless that would break the rule. Bytes are counted at the precision passed
// in: pass the precision the kernel executes in (executed_precision) to bound the real buffers.
#pragma once
#include "kernels/kernel_id.hpp"

namespace exasim {

struct ScalingLimits {
  double max_flops = 2e9;    // flops of one sampled GEMM run
  double max_bytes = 256e6;  // bytes moved by one sampled run (about its buffers' size)
  double min_bytes = 64e6;   // a scaled memory-bound kernel still moves this much (L3 here: 32 MB)
};

struct ScaledShape {
  KernelShape shape;
  double factor = 1;  // time(full) = time(shape) * factor
};

// Throws std::invalid_argument for a bad shape (check_shape) or limits that are not positive or
// have min_bytes > max_bytes.
ScaledShape scale_down(Kernel k, const KernelShape& s, Precision p, const ScalingLimits& lim);

}  // namespace exasim
