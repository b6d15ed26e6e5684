// Appends a transformer's ops to a step graph in the shared layer vocabulary: GEMMs with
// their data and weight gradients, memory-bound kernels, the optimizer update, collectives and
// point-to-point transfers, each with its kernel, shape, precision, FLOPs and bytes. The MoE
// (BaGuaLu) and the general transformer builders both use it, so an op called "attn_qkv" is the
// same thing in both.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sim/step_graph.hpp"

namespace exasim {

// A GEMM's shape: C[m x n] = A[m x k] B[k x n], `batch` independent products.
// Dimensions are range-checked before conversion (kernels/kernel_id.hpp: shape_dim throws
// std::invalid_argument past 2^53).
inline KernelShape gemm_shape(double m, double n, double k, double batch = 1) {
  return {{shape_dim(m, "a GEMM's m"), shape_dim(n, "a GEMM's n"), shape_dim(k, "a GEMM's k")},
          shape_dim(batch, "a GEMM's batch")};
}
inline KernelShape rows_cols(double rows, double cols, double third = 0) {
  return {{shape_dim(rows, "a kernel's rows"), shape_dim(cols, "a kernel's columns"), shape_dim(third)}, 1};
}
inline KernelShape elements(double n) { return {{shape_dim(n, "a kernel's element count"), 0, 0}, 1}; }

// The ops a new op runs after: one id, a list of ids or a vector of them, read in place (no
// vector is allocated per op); ids below zero mean "no dependency". Lives only for the call that
// takes it (a vector's elements are read where they are).
class After {
 public:
  After(long one) : own_{one}, begin_(own_), end_(own_ + 1) {}  // NOLINT: ids convert implicitly
  After(const std::vector<long>& v) : begin_(v.data()), end_(v.data() + v.size()) {}  // NOLINT
  After(std::initializer_list<long> l) : begin_(own_), end_(own_) {  // NOLINT
    // checked before any pointer is formed past own_ (own_ + 5 would be undefined behaviour)
    if (l.size() > kOwn) throw std::invalid_argument("GraphBuilder: more than 4 dependencies in a brace list");
    std::copy(l.begin(), l.end(), own_);
    end_ = own_ + l.size();
  }
  After(const After&) = delete;
  After& operator=(const After&) = delete;
  const long* begin() const { return begin_; }
  const long* end() const { return end_; }

 private:
  static constexpr size_t kOwn = 4;
  long own_[kOwn] = {};
  const long* begin_;
  const long* end_;
};

// The GEMMs of a fused attention pass that are the model's: FlashAttention-2's backward runs 5
// (the scores Q K^T again, then dP, dS's dQ and dK, and dV), of which 4 are the gradients that an
// unfused attention's backward computes (twice the forward's 2, as Megatron's and PaLM's counts
// have it); a forward's 2 are both the model's.
inline int model_attention_passes(int passes) { return passes == 5 ? 4 : passes; }

class GraphBuilder {
 public:
  explicit GraphBuilder(StepGraph& g) : g_(g) {}
  // A GEMM computed in `p` on operands stored in `storage` (under autocast the attention's
  // operands stay fp32 in memory and are cast on the way in), appended after `after` (or after
  // nothing when after < 0); returns its id.
  long gemm(std::string name, std::string label, Phase ph, Precision p, Precision storage, KernelShape s,
            const After& after) {
    const NominalWork w = nominal_work(Kernel::gemm, s, storage);
    executed_ += w.flops;
    if (ph != Phase::optimizer) count_model(w.flops);
    return add(std::move(name), std::move(label), ph, ComputeWork{Kernel::gemm, p, w.flops, w.bytes, s}, after);
  }
  // A GEMM that moves data rather than computes the model (GShard's dispatch and combine einsums,
  // one-hot masks times tokens): executed FLOPs on the matrix unit, not model FLOPs.
  long routing_gemm(std::string name, std::string label, Phase ph, Precision p, Precision storage, KernelShape s,
                    const After& after) {
    const NominalWork w = nominal_work(Kernel::gemm, s, storage);
    executed_ += w.flops;
    return add(std::move(name), std::move(label), ph, ComputeWork{Kernel::gemm, p, w.flops, w.bytes, s}, after);
  }
  // The backward of the forward GEMM C[m x n] = A[m x k] B[k x n]: the data gradient
  // dA[m x k] = dC[m x n] B^T, then the weight gradient dB[k x n] = A^T dC[m x n].
  long gemm_backward(std::string name, std::string label, Precision p, Precision storage, KernelShape fwd,
                     const After& after) {
    const auto [m, n, k] = fwd.dims;
    const long dgrad = gemm(name + ".dgrad", label + ".dgrad", Phase::backward, p, storage, gemm_shape(m, k, n, fwd.batch), after);
    return gemm(std::move(name) + ".wgrad", std::move(label) + ".wgrad", Phase::backward, p, storage,
                gemm_shape(k, n, m, fwd.batch), dgrad);
  }
  long memory(std::string name, std::string label, Phase ph, Kernel kernel, Precision p, KernelShape s,
              double flops, double bytes, const After& after, double random_words = 0) {
    executed_ += flops;
    ComputeWork w{kernel, p, flops, bytes, s};
    w.random_words = random_words;
    return add(std::move(name), std::move(label), ph, std::move(w), after);
  }
  // A streaming pass of its own over `n` fp32 elements (ComputeWork::standalone): the optimizer's
  // passes and gradient clipping, at the streaming (residual add) efficiency.
  long standalone_pass(std::string name, std::string label, Phase ph, double n, double flops, double bytes,
                       const After& after) {
    executed_ += flops;
    ComputeWork w{Kernel::residual_add, Precision::fp32, flops, bytes, elements(n)};
    w.standalone = true;
    return add(std::move(name), std::move(label), ph, std::move(w), after);
  }
  // FlashAttention over `pairs` (sequence, head) pairs of `seq` tokens and head size `head_dim`:
  // `passes` GEMMs of s x s x head_dim each (2 forward, 5 backward); `causal`: under a causal mask,
  // the kernel that computes only the lower triangle (flash_attention_causal). Model FLOPs count the
  // whole s x s GEMMs the kernel replaces, masked or not (as Megatron's and PaLM's model FLOPs do),
  // and the recomputed ones (`model_flops` when the caller counts them: a ring-attention block);
  // of a backward's 5 GEMMs, the 4 of the gradients (model_attention_passes: the scores recomputed
  // inside the kernel are not the model's); executed FLOPs what the kernel runs.
  long fused_attention(std::string name, std::string label, Phase ph, Precision p, double seq, double head_dim,
                       int passes, double pairs, const After& after, bool causal = false, double model_flops = -1) {
    const Kernel k = causal ? Kernel::flash_attention_causal : Kernel::flash_attention;
    const KernelShape s{{std::int64_t(seq), std::int64_t(head_dim), passes}, std::int64_t(pairs)};
    const NominalWork w = nominal_work(k, s, p);
    executed_ += w.flops;
    const KernelShape model_shape{{std::int64_t(seq), std::int64_t(head_dim), model_attention_passes(passes)},
                                  std::int64_t(pairs)};
    count_model(model_flops >= 0 ? model_flops : nominal_work(Kernel::flash_attention, model_shape, p).flops);
    return add(std::move(name), std::move(label), ph, ComputeWork{k, p, w.flops, w.bytes, s}, after);
  }
  // The optimizer's update pass over a parameter shard.
  long optimizer_update(std::string name, std::string label, double parameters,
                        const After& after) {
    const KernelShape s = elements(parameters);
    const NominalWork w = nominal_work(Kernel::adam, s, Precision::fp32);
    executed_ += w.flops;
    return add(std::move(name), std::move(label), Phase::optimizer, ComputeWork{Kernel::adam, Precision::fp32, w.flops, w.bytes, s}, after);
  }
  // Optimizer offload: `elements` values of precision p copied between the device and its host
  // over the host link (p's bytes each), in the optimizer phase. Data movement, not a kernel:
  // costed as bytes / the host link's bandwidth; no flops.
  long host_copy(std::string name, std::string label, double elements, Precision p,
                 const After& after) {
    const double bytes = elements * bytes_per_element(p);
    return add(std::move(name), std::move(label), Phase::optimizer, ComputeWork{Kernel::host_copy, p, 0, bytes, exasim::elements(elements)},
               after);
  }
  // Optimizer offload: the Adam update of `parameters` by the host CPU, moving `bytes` to and from
  // host memory (costed as bytes / the host's memory bandwidth per device). Its flops (12 per
  // parameter, as the device's Adam) run on the host: not counted in executed_flops, which
  // counts the devices' work.
  long host_optimizer_update(std::string name, std::string label, double parameters, double bytes,
                             const After& after) {
    return add(std::move(name), std::move(label), Phase::optimizer,
               ComputeWork{Kernel::host_adam, Precision::fp32, 12 * parameters, bytes, exasim::elements(parameters)},
               after);
  }
  long collective(std::string name, std::string label, Phase ph, CollectiveKind k,
                  CollectiveAlgorithm a, const std::string& role, double bytes, const After& after) {
    return add(std::move(name), std::move(label), ph, CollectiveWork{k, a, role, bytes}, after);
  }
  // A point-to-point send to, or receive from, the member at `offset` of this rank's group.
  long transfer(std::string name, std::string label, Phase ph, TransferWork::Direction dir,
                const std::string& role, int offset, double bytes, long tag, const After& after) {
    return add(std::move(name), std::move(label), ph, TransferWork{dir, role, offset, bytes, tag}, after);
  }
  // A compute op that runs beside communication kernels computes on the SMs they leave
  // (ComputeWork::communication_sms).
  void set_communication_sms(long id, int sms) {
    std::get<ComputeWork>(g_[static_cast<OpId>(id)].work).communication_sms = sms;
  }
  StepGraph& graph() { return g_; }
  long ops() const { return static_cast<long>(boost::num_vertices(g_)); }
  double executed_flops() const { return executed_; }
  double model_flops() const { return model_; }
  // Model FLOPs added while recomputing (between set_recomputing(true) and (false)): a recomputed
  // forward's GEMMs, which Megatron's Eq. 3 counts and the MFU of Chowdhery et al. (PaLM), as Llama 3
  // reports it, does not.
  void set_recomputing(bool recomputing) { recomputing_ = recomputing; }
  double recomputed_model_flops() const { return recomputed_; }
  // Of the model FLOPs counted outside recomputation, those a causal mask hides: half of a causal
  // self-attention core's whole s x s GEMMs (the caller names them). A count that leaves them out
  // (6 N + 6 L d s a token, as FlashAttention's benchmarks count causal attention) is the MFU
  // count less these.
  void count_masked_attention(double flops) {
    if (!recomputing_) masked_ += flops;
  }
  double masked_attention_model_flops() const { return masked_; }

 private:
  void count_model(double flops) {
    model_ += flops;
    if (recomputing_) recomputed_ += flops;
  }
  template <class Work>
  long add(std::string name, std::string label, Phase ph, Work w, const After& after) {
    // (boost's add_vertex(property) copies the op: a default vertex, then each field moved in, with
    // no whole Op built and moved as well)
    const OpId v = boost::add_vertex(g_);
    Op& op = g_[v];
    op.name = std::move(name);
    op.label = std::move(label);
    op.phase = ph;
    op.work.template emplace<Work>(std::move(w));
    for (const long d : after)
      if (d >= 0) boost::add_edge(static_cast<OpId>(d), v, g_);
    return static_cast<long>(v);
  }
  StepGraph& g_;
  double executed_ = 0, model_ = 0, recomputed_ = 0, masked_ = 0;
  bool recomputing_ = false;
};

}  // namespace exasim
