#include "kernels/kernel_id.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace exasim {

const char* to_string(Precision p) {
  switch (p) {
    case Precision::fp64: return "fp64";
    case Precision::fp32: return "fp32";
    case Precision::fp16: return "fp16";
    case Precision::fp8: return "fp8";
  }
  return "?";
}
const char* to_string(KernelClass k) {
  switch (k) {
    case KernelClass::gemm: return "gemm";
    case KernelClass::memory_bound: return "memory_bound";
    case KernelClass::optimizer_update: return "optimizer_update";
    case KernelClass::host_link: return "host_link";
    case KernelClass::host_memory: return "host_memory";
    case KernelClass::fused_attention: return "fused_attention";
  }
  return "?";
}
const char* to_string(Kernel k) {
  switch (k) {
    case Kernel::gemm: return "gemm";
    case Kernel::softmax: return "softmax";
    case Kernel::layer_norm: return "layer_norm";
    case Kernel::gelu: return "gelu";
    case Kernel::residual_add: return "residual_add";
    case Kernel::gate_topk: return "gate_topk";
    case Kernel::token_permute: return "token_permute";
    case Kernel::adam: return "adam";
    case Kernel::im2col: return "im2col";
    case Kernel::batch_norm: return "batch_norm";
    case Kernel::pool: return "pool";
    case Kernel::host_copy: return "host_copy";
    case Kernel::host_adam: return "host_adam";
    case Kernel::flash_attention: return "flash_attention";
    case Kernel::flash_attention_causal: return "flash_attention_causal";
  }
  return "?";
}
std::optional<Precision> precision_from_string(std::string_view s) {
  for (Precision p : {Precision::fp64, Precision::fp32, Precision::fp16, Precision::fp8})
    if (s == to_string(p)) return p;
  return std::nullopt;
}
std::optional<Kernel> kernel_from_string(std::string_view s) {
  for (Kernel k : all_kernels)
    if (s == to_string(k)) return k;
  return std::nullopt;
}
bool is_fused_attention(Kernel k) { return kernel_class(k) == KernelClass::fused_attention; }

std::optional<Kernel> profiled_kernel_from_string(std::string_view s) {
  if (auto k = kernel_from_string(s)) return k;
  for (Kernel k : fused_attention_kernels)
    if (s == to_string(k)) return k;
  return std::nullopt;
}

std::int64_t shape_dim(double x, const char* what) {
  if (!(x >= 0 && x <= kMaxShapeDim))
    throw std::invalid_argument(fmt::format("{} of {:g} is outside 0 .. 2^53: the model and plan give a kernel no "
                                            "device could run",
                                            what, x));
  return static_cast<std::int64_t>(x);
}

double bytes_per_element(Precision p) {
  switch (p) {
    case Precision::fp64: return 8;
    case Precision::fp32: return 4;
    case Precision::fp16: return 2;
    case Precision::fp8: return 1;
  }
  return 4;
}

KernelClass kernel_class(Kernel k) {
  switch (k) {
    case Kernel::gemm: return KernelClass::gemm;
    case Kernel::adam: return KernelClass::optimizer_update;
    case Kernel::host_copy: return KernelClass::host_link;
    case Kernel::host_adam: return KernelClass::host_memory;
    case Kernel::flash_attention:
    case Kernel::flash_attention_causal: return KernelClass::fused_attention;
    default: return KernelClass::memory_bound;
  }
}

bool is_host_class(KernelClass c) { return c == KernelClass::host_link || c == KernelClass::host_memory; }

int shape_rank(Kernel k) {
  switch (k) {
    case Kernel::gemm:
    case Kernel::im2col:
    case Kernel::pool:
    case Kernel::gate_topk:
    case Kernel::flash_attention:
    case Kernel::flash_attention_causal: return 3;
    case Kernel::softmax:
    case Kernel::layer_norm:
    case Kernel::batch_norm:
    case Kernel::token_permute: return 2;
    default: return 1;
  }
}

std::array<const char*, 3> shape_axis_names(Kernel k) {
  switch (k) {
    case Kernel::gemm: return {"m", "n", "k"};
    case Kernel::gate_topk: return {"tokens", "experts", "k"};
    case Kernel::token_permute: return {"tokens", "d_model", ""};
    case Kernel::im2col:
    case Kernel::pool: return {"pixels", "channels", "window"};
    case Kernel::flash_attention:
    case Kernel::flash_attention_causal: return {"seq", "head_dim", "passes"};
    case Kernel::softmax:
    case Kernel::layer_norm:
    case Kernel::batch_norm: return {"rows", "cols", ""};
    default: return {"elements", "", ""};
  }
}

std::string describe(Kernel k, const KernelShape& s) {
  std::string out = fmt::format("{}[{}", to_string(k), s.dims[0]);
  for (int i = 1; i < shape_rank(k); ++i) out += fmt::format("x{}", s.dims[i]);
  out += "]";
  if (s.batch != 1) out += fmt::format("x{}", s.batch);
  return out;
}

NominalWork nominal_work(Kernel k, const KernelShape& s, Precision p) {
  const double e = bytes_per_element(p);
  const double a = double(s.dims[0]), b = double(s.dims[1]), c = double(s.dims[2]), batch = double(s.batch);
  switch (k) {
    case Kernel::gemm: return {2 * a * b * c * batch, (a * c + c * b + a * b) * e * batch};
    case Kernel::softmax: return {5 * a * b, 2 * a * b * e};
    case Kernel::layer_norm: return {8 * a * b, (2 * a * b + 2 * b) * e};
    case Kernel::gelu: return {8 * a, 2 * a * e};
    case Kernel::residual_add: return {a, 3 * a * e};
    // scores read, k (index, weight) pairs written per token
    case Kernel::gate_topk: return {4 * a * b, a * b * e + a * c * (e + 4)};
    // rows gathered: read and written once, plus the 4-byte index per row
    case Kernel::token_permute: return {0, 2 * a * b * e + 4 * a};
    // fp32 master params, grads, two moments: 4 reads and 3 writes of 4 bytes
    case Kernel::adam: return {12 * a, 28 * a};
    // each window tap's row read, the patch matrix written
    case Kernel::im2col: return {0, 2 * a * b * c * e};
    // statistics pass (read), normalise-scale-shift-ReLU pass (read, write); scale and shift
    case Kernel::batch_norm: return {8 * a * b, (3 * a * b + 2 * b) * e};
    // each window tap's row read, the maximum written
    case Kernel::pool: return {a * b * c, (a * b * c + a * b) * e};
    // a copy: each value crosses the host link once
    case Kernel::host_copy: return {0, a * e};
    // as adam, on the host (see models/transformer.cpp for the offloaded step's byte count)
    case Kernel::host_adam: return {12 * a, 28 * a};
    // `c` GEMMs of s x s x head_dim per (sequence, head) pair; memory traffic only for the operands:
    // forward reads Q, K, V and writes O; backward reads Q, K, V, O, dO and writes dQ, dK, dV.
    case Kernel::flash_attention: return {2 * c * a * a * b * batch, (c <= 2 ? 4 : 8) * a * b * e * batch};
    // the lower triangle's s (s + 1) / 2 pairs of the s^2 above; the same operands
    case Kernel::flash_attention_causal: return {c * a * (a + 1) * b * batch, (c <= 2 ? 4 : 8) * a * b * e * batch};
  }
  return {};
}

const char* to_string(BatchNormPass p) {
  switch (p) {
    case BatchNormPass::statistics: return "statistics";
    case BatchNormPass::normalise: return "normalise";
    case BatchNormPass::grad_reduce: return "grad_reduce";
    case BatchNormPass::grad_apply: return "grad_apply";
  }
  return "?";
}

NominalWork batch_norm_pass_work(BatchNormPass pass, const KernelShape& s, Precision p) {
  const double e = bytes_per_element(p);
  const double x = double(s.dims[0]) * double(s.dims[1]), c = double(s.dims[1]);
  switch (pass) {
    case BatchNormPass::statistics: return {3 * x, x * e};
    case BatchNormPass::normalise: return {5 * x, (2 * x + 2 * c) * e};
    case BatchNormPass::grad_reduce: return {4 * x, 2 * x * e};
    case BatchNormPass::grad_apply: return {7 * x, (3 * x + 2 * c) * e};
  }
  return {};
}

double transcendentals_per_element(Kernel k) {
  return k == Kernel::softmax || k == Kernel::gelu ? 1.0 : 0.0;
}

double transcendental_elements(Kernel k, const KernelShape& s) {
  if (k == Kernel::softmax) return double(s.dims[0]) * double(s.dims[1]);
  return k == Kernel::gelu ? double(s.dims[0]) : 0.0;
}

double fused_bytes(Kernel k, const KernelShape& s, Precision p) {
  const double e = bytes_per_element(p);
  const double a = double(s.dims[0]), b = double(s.dims[1]);
  switch (k) {
    case Kernel::gelu:
    case Kernel::im2col: return 0;
    case Kernel::residual_add: return a * e;
    case Kernel::softmax: return a * b * e;
    case Kernel::layer_norm: return (a * b + 2 * b) * e;
    default: return nominal_work(k, s, p).bytes;
  }
}

}  // namespace exasim
