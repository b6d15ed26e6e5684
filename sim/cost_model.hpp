// Cost model seam: (compute work, device) -> seconds. The engine does not care how the
// answer is found; this one is a roofline with a per-kernel-class efficiency.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/step_graph.hpp"

namespace exasim {

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual double compute_time_s(const ComputeWork& w) const = 0;
  // The kernel's time while communication kernels beside it hold `communication_sms` of the
  // device's streaming multiprocessors (CollectiveWork::kernel_sms; the larger of these and the
  // kernel's own margin, ComputeWork::communication_sms, are taken). A model that knows no SMs:
  // compute_time_s.
  virtual double compute_time_beside_s(const ComputeWork& w, int communication_sms) const {
    (void)communication_sms;
    return compute_time_s(w);
  }
  virtual std::string describe() const = 0;
};

// A fused attention kernel's published rates on a device (a device file's flash_attention_kernels
// entry, chosen by the plan's attention_kernel): the flop/s its benchmark measured at each sequence
// length, forward and backward, full and causal masks, at one head dimension, 16-bit. The flops are
// the benchmark's (FlashAttention's: 4 s^2 d a (sequence, head) pair forward, 2.5 times that
// backward, half of each under the causal mask), which are exasim's flash_attention and
// flash_attention_causal counts at passes 2 and 5 (kernels/kernel_id.cpp).
struct AttentionKernelTable {
  std::string name;
  int head_dim = 0;
  std::vector<double> seq;  // ascending
  std::vector<double> forward_flops_per_s, forward_causal_flops_per_s;
  std::vector<double> backward_flops_per_s, backward_causal_flops_per_s;
  // The rate at `tokens`: linear in log2(tokens) between the table's sequence lengths, the first or
  // the last point's rate outside them.
  double rate_flops_per_s(double tokens, bool causal, bool backward) const;
};

// A device (one node's worth of compute units) with its peaks and achieved efficiencies.
struct DeviceProfile {
  // The device's compiler fuses memory-bound kernels into their neighbours (XLA on a TPU; the
  // device file's "compiler"): each such kernel then streams fused_bytes() (kernels/kernel_id.hpp)
  // instead of its nominal bytes. GPU frameworks that launch one kernel per op do not.
  bool fuses_elementwise = false;
  // The device's systolic matrix unit (the device file's "matrix_unit"; 0: none described): a
  // GEMM's contraction runs down its `matrix_unit_rows` and one output dimension across its
  // `matrix_unit_columns` (a TPU v3 MXU: 128 x 128), the other output dimension streams through.
  // When given, a GEMM's shape efficiency is matrix_unit_utilisation(), not the host's.
  int matrix_unit_rows = 0;
  int matrix_unit_columns = 0;
  std::string name;
  std::map<Precision, double> peak_flops_per_s;       // whole node
  std::map<Precision, double> gemm_efficiency;        // fraction of peak a large GEMM reaches
  std::map<Precision, double> flash_attention_efficiency;  // fraction of peak FlashAttention reaches (0: none)
  double memory_bandwidth_Bps = 0;                    // achieved, for memory-bound kernels
  double optimizer_memory_bandwidth_Bps = 0;          // achieved by the optimizer update
  // Optimizer offload (0: the machine does not describe its hosts): the device's link to its
  // host (PCIe, per direction) and its share of the host's memory bandwidth for the CPU optimizer.
  double host_link_Bps = 0;
  double host_memory_Bps = 0;
  // Streaming multiprocessors of a GPU (0: the device file gives none). A kernel launched beside
  // communication kernels (ComputeWork::communication_sms) computes on the rest.
  int streaming_multiprocessors = 0;
  // Transcendental results per second of a GPU's special function units (0: the device file gives
  // none). With it, a kernel whose host rate is bound by its exp or tanh (transcendentals_per_element
  // > 0) is not carried at that host efficiency: its device time is the slowest of its flops at
  // peak, its bytes at the host's streaming efficiency for as many elements (a residual add's),
  // and its transcendentals on these units (transcendental_time_s).
  double special_function_ops_per_s = 0;
  // Element-wise operations per second of the vector unit beside a separate matrix unit (a TPU
  // TensorCore's VPU beside its MXUs; 0: the device file gives none). With it, the flops of a kernel
  // that is not a GEMM (layer norm, softmax, GELU, a residual add or dropout, an optimizer update)
  // run at this rate instead of the matrix unit's peak, whatever the precision (a TPU v3's vector
  // unit computes in fp32): a fused GELU that streams no bytes of its own still takes its flops'
  // time on the vector unit (elementwise_time_s).
  double vector_unit_ops_per_s = 0;
  // The vector operations the device's compiler spends on each 32-bit random word a kernel draws
  // (ComputeWork::random_words: a dropout mask), where no hardware generator draws them (XLA on a
  // TPU: ThreeFry-2x32 in integer vector ops; 0: drawing costs nothing beyond the kernel's flops).
  double vector_ops_per_random_word = 0;
  // A kernel's element-wise time: (flops + random_words x vector_ops_per_random_word) /
  // vector_unit_ops_per_s, or flops / peak at the kernel's precision when the device gives no
  // vector-unit rate.
  double elementwise_time_s(const ComputeWork& w) const;
  // Its kernels' efficiencies were measured on the device itself (the device file's kernel_profile):
  // a softmax's or GELU's measured rate already holds the special function units, so the host-bound
  // correction above does not apply.
  bool kernels_measured_on_device = false;
  bool evaluates_transcendentals(Kernel k) const {
    return !kernels_measured_on_device && special_function_ops_per_s > 0 && transcendentals_per_element(k) > 0;
  }
  // A kernel's transcendentals / special_function_ops_per_s (0 when the device gives no rate).
  double transcendental_time_s(const ComputeWork& w) const;
  // The factor a kernel's compute time grows by when it runs on the SMs the communication kernels
  // leave: sms / (sms - communication_sms), 1 when it has the whole device. Throws
  // std::invalid_argument naming the device when it has no SM count or too few.
  double compute_share_factor(const ComputeWork& w) const;
  // w beside communication kernels holding `sms` SMs: its communication_sms the larger of its own
  // and `sms`, at most all SMs but one (kernels that asked for more wait for SMs; the compute keeps
  // one). Unchanged on a device with no SM count (the share cannot be known: none is charged).
  ComputeWork beside_communication(const ComputeWork& w, int sms) const;
  // The device file's half_gemm_ridge_scaled: a 16-bit GEMM takes the host's relative efficiency
  // at the fp32 shape of the same arithmetic intensity relative to the ridge (half_gemm_host_shape).
  bool half_gemm_ridge_scaled = false;
  // A 16-bit GEMM's shape as the host's fp32 surface should be read for it: as given, or, with
  // half_gemm_ridge_scaled, every dimension times f = (fp32 peak x fp32 GEMM efficiency) /
  // (fp16 peak x fp16 GEMM efficiency) x (4 bytes / 2 bytes), so that its intensity (flops per byte
  // moved, which scales with the dimensions) stands as far from the fp32 ridge (achieved flops per
  // byte of bandwidth) as the fp16 GEMM's stands from the fp16 ridge. A SIMD unit whose half lanes
  // do 4x the fp32 flops while its scratchpad and DMA carry only 2x the elements needs twice the
  // intensity to reach the same share of its best case (the SW26010-Pro's CPE: 32 fp16 lanes, 8 fp32).
  KernelShape half_gemm_host_shape(const KernelShape& s) const;
  // The peak at a precision and the best-case GEMM efficiency; throw std::invalid_argument
  // naming the device when it has none.
  double peak_flops_s(Precision p) const;
  double gemm_efficiency_at(Precision p) const;
  // FlashAttention's best-case efficiency; throws naming the device when its file gives none.
  double flash_attention_efficiency_at(Precision p) const;
  // The attention kernel the run calls, where the plan names one of the device file's published
  // tables (plan.attention_kernel); none: the device's own best case and measured profile.
  std::optional<AttentionKernelTable> attention_kernel;
  // The fused attention kernel's time: max(flops / (peak x its efficiency), bytes / bandwidth).
  // relative_efficiency: the kernel's efficiency at its shape relative to that best case (1 where
  // only the best case is known), from a profile measured on the device. With an attention_kernel,
  // max(flops / its table's rate at the kernel's length, mask and pass, bytes / bandwidth), and
  // relative_efficiency is not used; throws std::invalid_argument naming the device and the table
  // for another head dimension, a pass other than forward (2) or backward (5), or not 16-bit.
  double fused_attention_time_s(const ComputeWork& w, double relative_efficiency = 1.0) const;
  // The bandwidth a class's bytes stream at: the optimizer's own, the host link's, the host
  // memory's, else the memory bandwidth. Throws std::invalid_argument naming the device when a
  // host class's bandwidth is not given.
  double bandwidth_Bps(KernelClass c) const;
  // Offload's data movement (is_host_class): bytes / the class's bandwidth. These are not sampled
  // kernels: neither the device's peaks nor the host profile's efficiencies apply.
  double host_data_movement_time_s(const ComputeWork& w) const;
  // The rate a kernel class's efficiency is measured against: flop/s for GEMMs, bytes/s otherwise.
  double class_peak(KernelClass c, Precision p) const;
  // The bytes a compute op streams on this device: fused_bytes() for a memory-bound kernel when
  // the compiler fuses, else the op's own count.
  double streamed_bytes(const ComputeWork& w) const;
  bool has_matrix_unit() const { return matrix_unit_rows > 0 && matrix_unit_columns > 0; }
  // The fraction of the matrix unit a GEMM {m, n, k} keeps busy: k padded to whole multiples of
  // the rows, and the shorter of m and n (the longer one streams) padded to whole multiples of
  // the columns: (k / (rows ceil(k / rows))) (s / (columns ceil(s / columns))), s = min(m, n).
  // 1 without a matrix unit; throws std::invalid_argument for a shape that is not a GEMM's.
  double matrix_unit_utilisation(const KernelShape& gemm) const;
};

// time = max(flops / (peak * efficiency), bytes / bandwidth); memory-bound kernels run
// their flops at peak (they are limited by bytes). The optimizer update uses its own bandwidth;
// offload's host copies and host Adam take bytes / host bandwidth.
class RooflineCostModel final : public CostModel {
 public:
  explicit RooflineCostModel(DeviceProfile d);
  double compute_time_s(const ComputeWork& w) const override;
  double compute_time_beside_s(const ComputeWork& w, int communication_sms) const override {
    return compute_time_s(device_.beside_communication(w, communication_sms));
  }
  std::string describe() const override;
  const DeviceProfile& device() const { return device_; }

 private:
  DeviceProfile device_;
};

}  // namespace exasim
