// The vocabulary of compute kernels: which kernel, on what shape, in which precision.
// The step graph names its compute work with it, the real kernels in kernels/ implement each
// one, and the cost model looks a kernel's efficiency up by it. Nothing here is costed.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace exasim {

// fp8: Hopper's 8-bit tensor-core GEMM inputs (E4M3/E5M2, Transformer Engine); only GEMMs run in
// it (a device file gives its peak and GEMM efficiency), their outputs and every other kernel stay 16-bit.
enum class Precision { fp64, fp32, fp16, fp8 };

// Kernel classes the cost model distinguishes.
// optimizer_update: the optimizer's element-wise pass over the parameter buffers, memory-bound
// like memory_bound but costed with its own bandwidth (on Sunway it is not one of the layer
// kernels that BaGuaLu rewrote for rearranged DMA).
// host_link, host_memory: optimizer offload's data movement, which runs off the device and is not
// a sampled kernel: a copy between the device and its host over the host link (PCIe), costed as
// bytes / the machine's host_link_Bps, and the optimizer update on the host CPU, memory-bound,
// costed as bytes / the machine's host_memory_Bps (per device).
// fused_attention: FlashAttention's fused kernel (Dao et al.), which keeps the s x s scores in
// on-chip memory: compute-bound, costed as flops / (device peak x the device file's published
// best-case fused-attention efficiency); not sampled on the host (no host kernel runs it).
enum class KernelClass { gemm, memory_bound, optimizer_update, host_link, host_memory, fused_attention };

// The kernels of a transformer training step.
enum class Kernel {
  gemm,           // C[m x n] = A[m x k] B[k x n], `batch` independent products
  softmax,        // row-wise softmax of a rows x cols matrix
  layer_norm,     // row-wise layer norm (with scale and bias) of a rows x cols matrix
  gelu,           // element-wise GELU (tanh form) of `elements` values
  residual_add,   // y = a + b over `elements` values
  gate_topk,      // MoE gate: per token (row) the top-k of `experts` scores, with a softmax over them
  token_permute,  // MoE dispatch/combine: gather the rows of a tokens x d_model matrix by an index
  adam,           // Adam update of `elements` parameters (fp32 params, grads and moments)
  // Convolutional networks (channels last, NHWC): a convolution is im2col + GEMM.
  im2col,         // gather `window` input rows of `channels` values for each of `pixels` output pixels
  batch_norm,     // per-channel batch norm (statistics over `rows` pixels) with its ReLU, rows x cols
  pool,           // max over `window` input rows of `channels` values for each of `pixels` output pixels
  // Optimizer offload (ZeRO-Offload, M6-10T): not device kernels, so not in all_kernels (never
  // run, sampled or calibrated); the cost model times them by bytes / bandwidth alone.
  host_copy,      // `elements` values copied between the device and the host over the host link
  host_adam,      // Adam update of `elements` parameters by the host CPU, in host memory
  // FlashAttention (not in all_kernels: not run or calibrated on the host): the attention core
  // softmax(Q K^T) V of `batch` (sequence, head) pairs fused in one kernel, the scores never
  // written to memory. dims {seq, head_dim, passes}: passes = 2 GEMMs forward (Q K^T, P V),
  // 5 backward (Q K^T again, dV, dP, dQ, dK: FlashAttention-2's backward).
  flash_attention,
  // The same kernel under a causal mask (a decoder's self-attention): query i attends to keys 0..i,
  // and the kernel skips the blocks above the diagonal, so it computes the lower triangle's
  // s (s + 1) / 2 (query, key) pairs, not s^2 (its nominal work; the blocks that straddle the
  // diagonal are computed whole and masked, which its measured efficiency carries).
  flash_attention_causal,
};
// The device kernels (what kernels/ runs and the host profile measures).
inline constexpr std::array<Kernel, 11> all_kernels = {
    Kernel::gemm,          Kernel::softmax, Kernel::layer_norm, Kernel::gelu,       Kernel::residual_add, Kernel::gate_topk,
    Kernel::token_permute, Kernel::adam,    Kernel::im2col,     Kernel::batch_norm, Kernel::pool};

// The shape a kernel runs on. dims by kernel:
//   gemm:                             {m, n, k}, and batch
//   softmax, layer_norm, batch_norm:  {rows, cols}
//   im2col, pool:                     {pixels, channels, window}
//   gate_topk:                        {tokens, experts, k}
//   token_permute:                    {tokens, d_model}
//   gelu, residual_add, adam:         {elements}
//   host_copy, host_adam:             {elements}
//   flash_attention(_causal):         {seq, head_dim, passes}, batch = (sequence, head) pairs
// Unused dims are 0; batch is 1 except for batched GEMMs.
struct KernelShape {
  std::array<std::int64_t, 3> dims{};
  std::int64_t batch = 1;
  bool operator==(const KernelShape& o) const { return dims == o.dims && batch == o.batch; }
  bool operator<(const KernelShape& o) const { return dims != o.dims ? dims < o.dims : batch < o.batch; }
};

// A shape dimension computed in floating point (tokens x experts, a batch), converted to an integer
// only when it is finite, non-negative and at most kMaxShapeDim (2^53, where doubles stop counting
// exactly); otherwise throws std::invalid_argument naming `what` (a converted value out of range
// would be undefined behaviour).
inline constexpr double kMaxShapeDim = 9007199254740992.0;
std::int64_t shape_dim(double x, const char* what = "a kernel shape dimension");

const char* to_string(Precision p);
const char* to_string(KernelClass k);
const char* to_string(Kernel k);
std::optional<Precision> precision_from_string(std::string_view s);
std::optional<Kernel> kernel_from_string(std::string_view s);  // the device kernels (all_kernels)
// The fused attention kernels, which a profile measured on a GPU holds beside the device kernels.
inline constexpr std::array<Kernel, 2> fused_attention_kernels = {Kernel::flash_attention, Kernel::flash_attention_causal};
bool is_fused_attention(Kernel k);
// A kernel a profile may hold: the device kernels and the fused attention kernels.
std::optional<Kernel> profiled_kernel_from_string(std::string_view s);
double bytes_per_element(Precision p);

KernelClass kernel_class(Kernel k);
// host_link and host_memory: data movement off the device (see KernelClass), not a kernel.
bool is_host_class(KernelClass c);
// How many dims a kernel's shape uses (gemm 3, gate_topk 3, row-wise 2, element-wise 1).
int shape_rank(Kernel k);
// The names of those dims, e.g. {"m", "n", "k"}.
std::array<const char*, 3> shape_axis_names(Kernel k);
// "gemm[256x4096x1024]x16", "softmax[2048x128]": for messages and cache keys.
std::string describe(Kernel k, const KernelShape& s);

// The work a kernel does at a shape, as the host kernels count it: flops executed and bytes
// moved to and from memory (each operand read once, each result written once). The sampler
// divides these by the measured time to get the host's achieved rate.
struct NominalWork {
  double flops = 0;
  double bytes = 0;
};
NominalWork nominal_work(Kernel k, const KernelShape& s, Precision p);

// The transcendental functions a kernel evaluates per element of its shape: softmax one exp,
// GELU (tanh form) one tanh; 0 for the others. On the host these bound the kernel's rate (one
// core's vector exp or tanh is slower than its share of memory bandwidth), on a GPU the special
// function units evaluate them (DeviceProfile::special_function_ops_per_s). The elements are
// rows x cols (softmax) or elements (GELU).
double transcendentals_per_element(Kernel k);
double transcendental_elements(Kernel k, const KernelShape& s);

// Batch norm in training as XLA's BatchNormExpander writes it (and cuDNN runs it): each pass one
// fusion over the rows x cols activation X, its ReLU (forward) or the ReLU's mask (backward,
// recomputed from X and the statistics) folded in.
//   statistics:    sum(X) and sum(X^2), one read of X (two sibling reductions, one fusion)
//   normalise:     (X - mean) rsqrt(var + eps) gamma + beta, ReLU: X read, Y written, gamma and beta
//   grad_reduce:   sum(dY) and sum(dY (X - mean)) for dbeta and dgamma: dY and X read
//   grad_apply:    dX from dY, X and the two sums: dY and X read, dX written, gamma and beta
// The two forward passes sum to nominal_work(batch_norm); the backward reads dY besides X.
enum class BatchNormPass { statistics, normalise, grad_reduce, grad_apply };
const char* to_string(BatchNormPass p);
NominalWork batch_norm_pass_work(BatchNormPass pass, const KernelShape& s, Precision p);

// The bytes a memory-bound kernel still moves to and from memory when a fusing compiler (XLA on
// a TPU) compiles it into its neighbours: producer-consumer fusion applies an element-wise op
// as its producer writes its operand or as its consumer reads it, so GELU makes no pass of its
// own and a residual add only reads its second operand (the skip connection); a row reduction
// (softmax, layer norm, batch norm) must see its whole input before its result can be applied,
// so its statistics are one read pass of the rows (and the scale and shift), and the apply
// (normalise, scale-shift, exponentiate and divide) is fused into the consumer's read (softmax,
// layer norm: one consumer, a GEMM); batch norm keeps its passes' own bytes (batch_norm_pass_work):
// its statistics need the whole convolution output, its normalised output feeds the next
// convolution and, saved, that convolution's weight gradient, and its input gradient feeds two
// convolutions (data and weight gradients), so none of them fuses into a neighbour; im2col vanishes under an implicit-GEMM convolution (the window is read in place). Other
// kernels (pooling windows, the MoE gate and permutation, Adam) keep their nominal bytes.
double fused_bytes(Kernel k, const KernelShape& s, Precision p);

}  // namespace exasim
