#include "models/transformer.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "models/graph_builder.hpp"
#include "models/pipeline_schedule.hpp"

namespace exasim {

namespace {

using Dir = TransferWork::Direction;

struct Dims {
  double T = 0;        // tokens per micro-batch
  double b = 0;        // sequences per micro-batch
  double s = 0, d = 0, h = 0, ff = 0, V = 0;
  double t = 1;        // tensor-parallel size
  // MoE (E > 0): E experts, top-k routing, capacity factor cf, ep devices exchanging tokens.
  double E = 0, k = 1, cf = 1, ep = 1;
  double local_experts() const { return E / ep; }
  // Expert capacity per expert and micro-batch: the ep devices' T k routed tokens over E
  // experts, times cf (GShard); each device computes its E / ep experts on their full capacity.
  double capacity() const { return cf * T * k * ep / E; }
  double expert_rows() const { return local_experts() * capacity(); }  // = cf T k
  double ea = 2;       // bytes per activation element
  Precision gemm = Precision::fp16, storage = Precision::fp16, elementwise = Precision::fp16;
};

// One pipeline stage's program: a chain of the device's ops in schedule order.
class StageBuilder {
 public:
  StageBuilder(StepGraph& g, const Dims& x, const ParallelPlan& plan, int stage, int layers_per_chunk)
      : b_(g), x_(x), plan_(plan), stage_(stage), lpc_(layers_per_chunk), vt_(plan.pipeline * plan.virtual_stages) {}

  void item(const PipelineItem& it) {
    const int vs = it.chunk * plan_.pipeline + stage_;  // virtual stage
    mb_ = fmt::format("mb{}.c{}.", it.micro_batch, it.chunk);
    if (it.forward) {
      if (vs > 0) receive(Phase::forward, tag(it.micro_batch, vs - 1, true), +1);
      if (vs == 0) embedding(Phase::forward);
      for (int l = 0; l < lpc_; ++l) layer_forward(layer_index(vs, l), Phase::forward, false);
      if (vs == vt_ - 1) head_forward();
      if (vs < vt_ - 1) send(Phase::forward, tag(it.micro_batch, vs, true), +1);
    } else {
      if (vs < vt_ - 1) receive(Phase::backward, tag(it.micro_batch, vs + 1, false), -1);
      if (vs == vt_ - 1) head_backward();
      for (int l = lpc_ - 1; l >= 0; --l) {
        const int layer = layer_index(vs, l);
        if (plan_.recompute == Recompute::full) layer_forward(layer, Phase::backward, true);
        layer_backward(layer);
      }
      if (vs == 0) embedding(Phase::backward);
      if (vs > 0) send(Phase::backward, tag(it.micro_batch, vs, false), -1);
    }
  }

  // Gradient reduction and optimizer update of this device's parameters, after its last
  // backward: the dense parameters among the data-parallel replicas ("dp"), the experts'
  // among the replicas that hold the same experts ("expert_dp").
  void optimizer(double dense_params, double expert_params) {
    const std::vector<long> done = all_done();
    long after = -1;
    after = update("dense", "dp", plan_.data, dense_params, done, after);
    update("expert", "expert_dp", plan_.data / plan_.expert, expert_params, done, after);
  }

  double executed_flops() const { return b_.executed_flops(); }
  double model_flops() const { return b_.model_flops(); }

 private:
  int layer_index(int vs, int l) const { return vs * lpc_ + l; }

  // One parameter group's reduction (all-reduce, or reduce-scatter under ZeRO), Adam on the
  // local shard, and (ZeRO) the all-gather of the updated parameters. Returns the Adam op.
  long update(const std::string& group, const std::string& role, int replicas, double params,
              const std::vector<long>& done, long after) {
    if (params <= 0) return after;
    const Phase G = Phase::backward, O = Phase::optimizer;
    const double grad_bytes = params * x_.ea;
    std::vector<long> adam_deps = done;
    adam_deps.push_back(after);
    double shard = params;
    if (replicas > 1) {
      const bool zero = plan_.zero_stage >= 1;
      adam_deps.push_back(b_.collective(group + ".grad." + (zero ? "reduce_scatter" : "all_reduce"),
                                        std::string("grad_") + (zero ? "reduce_scatter" : "all_reduce"), G,
                                        zero ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce,
                                        CollectiveAlgorithm::ring, role, grad_bytes, done));
      if (zero) shard = params / replicas;
    }
    const long adam = b_.optimizer_update(group + ".opt.adam", "adam", shard, adam_deps);
    if (replicas > 1 && plan_.zero_stage >= 1)
      b_.collective(group + ".opt.param_all_gather", "param_all_gather", O, CollectiveKind::all_gather,
                    CollectiveAlgorithm::ring, role, params * bytes_per_element(x_.storage), {adam});
    return adam;
  }
  long tag(int micro_batch, int sender_vs, bool forward) const {
    return (static_cast<long>(micro_batch) * vt_ + sender_vs) * 2 + (forward ? 0 : 1);
  }
  std::string name(const std::string& what) const { return mb_ + what; }
  std::vector<long> all_done() {
    std::vector<long> v = sends_;
    for (long d : deps()) v.push_back(d);
    return v;
  }

  // Pipeline messages: Megatron's scatter/gather sends 1/t of the activations per tensor rank.
  void send(Phase ph, long tag, int offset) {
    const double bytes = x_.T * x_.d * x_.ea / x_.t;
    sends_.push_back(b_.transfer(name(ph == Phase::forward ? "send_activations" : "send_gradients"),
                                 ph == Phase::forward ? "pp_send_activations" : "pp_send_gradients", ph, Dir::send, "pp",
                                 offset, bytes, tag, deps()));
  }
  void receive(Phase ph, long tag, int offset) {
    const double bytes = x_.T * x_.d * x_.ea / x_.t;
    last_ = b_.transfer(name(ph == Phase::forward ? "recv_activations" : "recv_gradients"),
                        ph == Phase::forward ? "pp_recv_activations" : "pp_recv_gradients", ph, Dir::recv, "pp", offset,
                        bytes, tag, deps());
    if (x_.t > 1)
      last_ = b_.collective(name("pp_all_gather"), "pp_all_gather", ph, CollectiveKind::all_gather,
                            CollectiveAlgorithm::ring, "tp", x_.T * x_.d * x_.ea, deps());
  }
  // An all-reduce of the T x d activations over "tp" after `after` (nothing without tensor parallelism).
  long tp_all_reduce(const std::string& what, Phase ph, long after) {
    if (x_.t <= 1) return after;
    return b_.collective(name(what), what, ph, CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "tp",
                         x_.T * x_.d * x_.ea, {after});
  }
  long tp_all_reduce(const std::string& what, Phase ph) {
    const std::vector<long> d = deps();
    if (x_.t <= 1 && d.size() == 1) return d[0];
    return b_.collective(name(what), what, ph, CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "tp",
                         x_.t <= 1 ? 0 : x_.T * x_.d * x_.ea, d);
  }
  // The dependencies of the device's next op: its last op and a pending join.
  std::vector<long> deps() {
    std::vector<long> d{last_};
    if (join_ >= 0) d.push_back(join_);
    join_ = -1;
    return d;
  }
  // ZeRO 3: a layer's parameters are all-gathered before its forward and its backward.
  void zero3_gather(int layer, Phase ph) {
    if (plan_.zero_stage < 3 || plan_.data <= 1) return;
    const double params = (12 * x_.d * x_.d + 13 * x_.d) / x_.t;
    last_ = b_.collective(name(fmt::format("L{}.{}.zero3_param_all_gather", layer, ph == Phase::forward ? "fwd" : "bwd")),
                          "zero3_param_all_gather", ph, CollectiveKind::all_gather, CollectiveAlgorithm::ring, "dp",
                          params * bytes_per_element(x_.storage), deps());
  }

  void embedding(Phase ph) {
    const double T = x_.T, d = x_.d;
    const bool F = ph == Phase::forward;
    last_ = b_.memory(name(F ? "embedding" : "embedding.bwd"), F ? "embedding" : "embedding.bwd", ph,
                      Kernel::token_permute, x_.storage, rows_cols(T, d), 0, (F ? 2 : 3) * T * d * x_.ea, deps());
  }
  void head_forward() {
    const double T = x_.T, d = x_.d, Vt = x_.V / x_.t;
    if (x_.V <= 0) return;
    const Phase F = Phase::forward;
    last_ = b_.memory(name("final_layernorm"), "final_layernorm", F, Kernel::layer_norm, x_.elementwise,
                      rows_cols(T, d), 8 * T * d, 2 * T * d * x_.ea, deps());
    last_ = b_.gemm(name("logits"), "logits", F, x_.gemm, x_.storage, gemm_shape(T, Vt, d), deps());
    last_ = b_.memory(name("cross_entropy"), "cross_entropy", F, Kernel::softmax, x_.elementwise, rows_cols(T, Vt),
                      5 * T * Vt, 2 * T * Vt * x_.ea, deps());
  }
  void head_backward() {
    const double T = x_.T, d = x_.d, Vt = x_.V / x_.t;
    if (x_.V <= 0) return;
    const Phase B = Phase::backward;
    last_ = b_.memory(name("cross_entropy.bwd"), "cross_entropy.bwd", B, Kernel::softmax, x_.elementwise,
                      rows_cols(T, Vt), 5 * T * Vt, 3 * T * Vt * x_.ea, deps());
    last_ = b_.gemm_backward(name("logits"), "logits", x_.gemm, x_.storage, gemm_shape(T, Vt, d), deps());
    last_ = tp_all_reduce("logits_grad_all_reduce", B);
    last_ = b_.memory(name("final_layernorm.bwd"), "final_layernorm.bwd", B, Kernel::layer_norm, x_.elementwise,
                      rows_cols(T, d), 8 * T * d, 3 * T * d * x_.ea, deps());
  }

  // Local shapes under 1-D tensor parallelism.
  KernelShape qkv() const { return gemm_shape(x_.T, 3 * x_.d / x_.t, x_.d); }
  KernelShape scores() const { return gemm_shape(x_.s, x_.s, x_.d / x_.h, x_.b * x_.h / x_.t); }
  KernelShape context() const { return gemm_shape(x_.s, x_.d / x_.h, x_.s, x_.b * x_.h / x_.t); }
  KernelShape proj() const { return gemm_shape(x_.T, x_.d, x_.d / x_.t); }
  KernelShape ffn1() const { return gemm_shape(x_.T, x_.ff / x_.t, x_.d); }
  KernelShape ffn2() const { return gemm_shape(x_.T, x_.d, x_.ff / x_.t); }

  // The attention core: what selective recomputation reruns.
  void attention_core(const std::string& p, Phase ph, const std::string& suffix) {
    const double T = x_.T, s = x_.s, ht = x_.h / x_.t;
    last_ = b_.gemm(p + "attn_scores" + suffix, "attn_scores" + suffix, ph, x_.gemm, x_.storage, scores(), deps());
    last_ = b_.memory(p + "attn_softmax" + suffix, "attn_softmax" + suffix, ph, Kernel::softmax, x_.elementwise,
                      rows_cols(T * ht, s), 5 * T * s * ht, 2 * T * s * ht * x_.ea, deps());
    last_ = b_.gemm(p + "attn_context" + suffix, "attn_context" + suffix, ph, x_.gemm, x_.storage, context(), deps());
  }

  // The forward of one layer; `recompute`: rerun before its backward (full recomputation).
  void layer_forward(int l, Phase ph, bool recompute) {
    const std::string sfx = recompute ? ".recompute" : "";
    const std::string p = name(fmt::format("L{}.{}.", l, recompute ? "recompute" : "fwd"));
    const double T = x_.T, d = x_.d, ea = x_.ea, fft = x_.ff / x_.t;
    const Precision ew = x_.elementwise;
    if (!recompute) zero3_gather(l, ph);
    last_ = b_.memory(p + "attn_layernorm", "attn_layernorm" + sfx, ph, Kernel::layer_norm, ew, rows_cols(T, d),
                      8 * T * d, 2 * T * d * ea, deps());
    last_ = b_.gemm(p + "attn_qkv", "attn_qkv" + sfx, ph, x_.gemm, x_.storage, qkv(), deps());
    attention_core(p, ph, sfx);
    last_ = b_.gemm(p + "attn_proj", "attn_proj" + sfx, ph, x_.gemm, x_.storage, proj(), deps());
    last_ = tp_all_reduce("tp_all_reduce" + sfx, ph);
    last_ = b_.memory(p + "attn_residual", "attn_residual" + sfx, ph, Kernel::residual_add, ew, elements(T * d),
                      3 * T * d, 3 * T * d * ea, deps());
    last_ = b_.memory(p + "ffn_layernorm", "ffn_layernorm" + sfx, ph, Kernel::layer_norm, ew, rows_cols(T, d),
                      8 * T * d, 2 * T * d * ea, deps());
    if (x_.E > 0) {
      moe_forward(p, ph, sfx);
    } else {
      last_ = b_.gemm(p + "ffn1", "ffn1" + sfx, ph, x_.gemm, x_.storage, ffn1(), deps());
      last_ = b_.memory(p + "ffn_gelu", "ffn_gelu" + sfx, ph, Kernel::gelu, x_.storage, elements(T * fft), 8 * T * fft,
                        2 * T * fft * ea, deps());
      last_ = b_.gemm(p + "ffn2", "ffn2" + sfx, ph, x_.gemm, x_.storage, ffn2(), deps());
      last_ = tp_all_reduce("tp_all_reduce" + sfx, ph);
    }
    last_ = b_.memory(p + "ffn_residual", "ffn_residual" + sfx, ph, Kernel::residual_add, ew, elements(T * d),
                      3 * T * d, 3 * T * d * ea, deps());
  }

  // The MoE layer's FFN (the vocabulary of models/moe_transformer.cpp): gate, top-k, permute,
  // all-to-all dispatch over "ep", the local experts on their capacity, all-to-all combine.
  KernelShape gate() const { return gemm_shape(x_.T, x_.E, x_.d); }
  KernelShape expert_ffn1() const { return gemm_shape(x_.capacity(), x_.ff, x_.d, x_.local_experts()); }
  KernelShape expert_ffn2() const { return gemm_shape(x_.capacity(), x_.d, x_.ff, x_.local_experts()); }
  double a2a_bytes() const { return x_.expert_rows() * x_.d * x_.ea; }
  void moe_forward(const std::string& p, Phase ph, const std::string& sfx) {
    const double T = x_.T, d = x_.d, E = x_.E, R = x_.expert_rows(), ea = x_.ea, ff = x_.ff;
    last_ = b_.gemm(p + "gate", "gate" + sfx, ph, Precision::fp32, Precision::fp32, gate(), deps());
    last_ = b_.memory(p + "gate_topk", "gate_topk" + sfx, ph, Kernel::gate_topk, Precision::fp32,
                      rows_cols(T, E, x_.k), 4 * T * E, 2 * T * E * 4, deps());
    last_ = b_.memory(p + "dispatch_permute", "dispatch_permute" + sfx, ph, Kernel::token_permute, x_.storage,
                      rows_cols(R, d), 0, 2 * R * d * ea, deps());
    last_ = b_.collective(p + "dispatch", "dispatch" + sfx, ph, CollectiveKind::all_to_all, CollectiveAlgorithm::pairwise,
                          "ep", x_.ep > 1 ? a2a_bytes() : 0, deps());
    last_ = b_.gemm(p + "expert_ffn1", "expert_ffn1" + sfx, ph, x_.gemm, x_.storage, expert_ffn1(), deps());
    last_ = b_.memory(p + "expert_gelu", "expert_gelu" + sfx, ph, Kernel::gelu, x_.storage, elements(R * ff),
                      8 * R * ff, 2 * R * ff * ea, deps());
    last_ = b_.gemm(p + "expert_ffn2", "expert_ffn2" + sfx, ph, x_.gemm, x_.storage, expert_ffn2(), deps());
    last_ = b_.collective(p + "combine", "combine" + sfx, ph, CollectiveKind::all_to_all, CollectiveAlgorithm::pairwise,
                          "ep", x_.ep > 1 ? a2a_bytes() : 0, deps());
    last_ = b_.memory(p + "combine_unpermute", "combine_unpermute" + sfx, ph, Kernel::token_permute, x_.storage,
                      rows_cols(R, d), 0, 2 * R * d * ea, deps());
  }
  void moe_backward(const std::string& p) {
    const double T = x_.T, d = x_.d, E = x_.E, R = x_.expert_rows(), ea = x_.ea, ff = x_.ff;
    const Phase B = Phase::backward;
    last_ = b_.memory(p + "combine_unpermute", "combine_unpermute.bwd", B, Kernel::token_permute, x_.storage,
                      rows_cols(R, d), 0, 2 * R * d * ea, deps());
    last_ = b_.collective(p + "combine", "combine.bwd", B, CollectiveKind::all_to_all, CollectiveAlgorithm::pairwise,
                          "ep", x_.ep > 1 ? a2a_bytes() : 0, deps());
    last_ = b_.gemm_backward(p + "expert_ffn2", "expert_ffn2", x_.gemm, x_.storage, expert_ffn2(), deps());
    last_ = b_.memory(p + "expert_gelu", "expert_gelu.bwd", B, Kernel::gelu, x_.storage, elements(R * ff), 8 * R * ff,
                      3 * R * ff * ea, deps());
    last_ = b_.gemm_backward(p + "expert_ffn1", "expert_ffn1", x_.gemm, x_.storage, expert_ffn1(), deps());
    last_ = b_.collective(p + "dispatch", "dispatch.bwd", B, CollectiveKind::all_to_all, CollectiveAlgorithm::pairwise,
                          "ep", x_.ep > 1 ? a2a_bytes() : 0, deps());
    last_ = b_.memory(p + "dispatch_permute", "dispatch_permute.bwd", B, Kernel::token_permute, x_.storage,
                      rows_cols(R, d), 0, 2 * R * d * ea, deps());
    last_ = b_.memory(p + "gate_topk", "gate_topk.bwd", B, Kernel::gate_topk, Precision::fp32, rows_cols(T, E, x_.k),
                      4 * T * E, 2 * T * E * 4, deps());
    last_ = b_.gemm_backward(p + "gate", "gate", Precision::fp32, Precision::fp32, gate(), deps());
  }

  // A GEMM's backward whose data gradient is followed by a tensor-parallel all-reduce that
  // overlaps the weight gradient.
  void gemm_backward_with_all_reduce(const std::string& p, const std::string& label, KernelShape fwd) {
    const auto [m, n, k] = fwd.dims;
    const Phase B = Phase::backward;
    const long dgrad = b_.gemm(p + label + ".dgrad", label + ".dgrad", B, x_.gemm, x_.storage,
                               gemm_shape(m, k, n, fwd.batch), deps());
    const long wgrad = b_.gemm(p + label + ".wgrad", label + ".wgrad", B, x_.gemm, x_.storage,
                               gemm_shape(k, n, m, fwd.batch), dgrad);
    const long ar = tp_all_reduce("tp_all_reduce.bwd", B, dgrad);
    last_ = wgrad;
    if (ar != dgrad) join_ = ar;  // the next op waits for the all-reduced input gradient too
  }

  void layer_backward(int l) {
    const std::string p = name(fmt::format("L{}.bwd.", l));
    const double T = x_.T, d = x_.d, s = x_.s, ea = x_.ea, ht = x_.h / x_.t, fft = x_.ff / x_.t;
    const Phase B = Phase::backward;
    const Precision ew = x_.elementwise;
    zero3_gather(l, B);
    last_ = b_.memory(p + "ffn_residual", "ffn_residual.bwd", B, Kernel::residual_add, ew, elements(T * d), 3 * T * d,
                      6 * T * d * ea, deps());
    if (x_.E > 0) {
      moe_backward(p);
    } else {
      last_ = b_.gemm_backward(p + "ffn2", "ffn2", x_.gemm, x_.storage, ffn2(), deps());
      last_ = b_.memory(p + "ffn_gelu", "ffn_gelu.bwd", B, Kernel::gelu, x_.storage, elements(T * fft), 8 * T * fft,
                        3 * T * fft * ea, deps());
      gemm_backward_with_all_reduce(p, "ffn1", ffn1());
    }
    last_ = b_.memory(p + "ffn_layernorm", "ffn_layernorm.bwd", B, Kernel::layer_norm, ew, rows_cols(T, d), 8 * T * d,
                      3 * T * d * ea, deps());
    last_ = b_.memory(p + "attn_residual", "attn_residual.bwd", B, Kernel::residual_add, ew, elements(T * d), 3 * T * d,
                      6 * T * d * ea, deps());
    last_ = b_.gemm_backward(p + "attn_proj", "attn_proj", x_.gemm, x_.storage, proj(), deps());
    if (plan_.recompute == Recompute::selective) attention_core(p, B, ".recompute");
    last_ = b_.gemm_backward(p + "attn_context", "attn_context", x_.gemm, x_.storage, context(), deps());
    last_ = b_.memory(p + "attn_softmax", "attn_softmax.bwd", B, Kernel::softmax, ew, rows_cols(T * ht, s),
                      5 * T * s * ht, 3 * T * s * ht * ea, deps());
    last_ = b_.gemm_backward(p + "attn_scores", "attn_scores", x_.gemm, x_.storage, scores(), deps());
    gemm_backward_with_all_reduce(p, "attn_qkv", qkv());
    last_ = b_.memory(p + "attn_layernorm", "attn_layernorm.bwd", B, Kernel::layer_norm, ew, rows_cols(T, d), 8 * T * d,
                      3 * T * d * ea, deps());
  }

  GraphBuilder b_;
  const Dims& x_;
  const ParallelPlan& plan_;
  int stage_, lpc_, vt_;
  long last_ = -1, join_ = -1;
  std::vector<long> sends_;
  std::string mb_;
};

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument(what); }

}  // namespace

TransformerWorkload build_transformer_workload(const ModelSpec& m, const TrainingSpec& t, const ParallelPlan& plan) {
  if (!m.dense() && plan.tensor > 1) bad("MoE models are not tensor-parallel here: use tensor_parallel 1 and expert_parallel");
  if (!m.dense() && (m.experts_per_layer % plan.expert != 0 || plan.data % plan.expert != 0))
    bad(fmt::format("expert_parallel ({}) must divide the experts ({}) and data_parallel ({})", plan.expert,
                    m.experts_per_layer, plan.data));
  if (m.dense() && plan.expert != 1) bad("a dense model has no experts: expert_parallel must be 1");
  if (plan.tensor_mode != TensorMode::one_d && plan.tensor > 1) bad("only 1-D tensor parallelism is built so far");
  if (plan.offload_optimizer) bad("optimizer offload is not simulated yet");
  if (t.precision == PrecisionPolicy::mixed)
    bad("precision \"mixed\" is BaGuaLu's layer-wise policy for MoDa layouts; use \"fp16\" or \"fp32\"");
  const int vt = plan.pipeline * plan.virtual_stages;
  if (m.layers % vt != 0)
    bad(fmt::format("layers ({}) must be a multiple of pipeline stages x virtual stages ({})", m.layers, vt));
  if (m.heads % plan.tensor != 0 || m.d_ff % plan.tensor != 0 || (m.vocab > 0 && m.vocab % plan.tensor != 0))
    bad(fmt::format("heads ({}), d_ff ({}) and vocab ({}) must be multiples of the tensor-parallel size ({})", m.heads,
                    m.d_ff, m.vocab, plan.tensor));
  if (plan.global_batch % (plan.micro_batch * plan.data) != 0)
    bad(fmt::format("global_batch ({}) must be a multiple of micro_batch x data_parallel ({} x {})", plan.global_batch,
                    plan.micro_batch, plan.data));

  TransformerWorkload out;
  out.placement = place_plan(plan, out.workload);
  Dims x;
  x.b = plan.micro_batch;
  x.s = t.seq_len;
  x.T = x.b * x.s;
  x.d = m.d_model;
  x.h = m.heads;
  x.ff = m.d_ff;
  x.V = m.vocab;
  x.t = plan.tensor;
  if (!m.dense()) {
    x.E = m.experts_per_layer;
    x.k = m.top_k;
    x.cf = m.capacity_factor;
    x.ep = plan.expert;
  }
  const bool half = t.precision == PrecisionPolicy::fp16;
  x.gemm = x.storage = x.elementwise = half ? Precision::fp16 : Precision::fp32;
  x.ea = bytes_per_element(x.storage);

  const int mbs = plan.micro_batches();
  const int lpc = m.layers / vt;
  // Per layer (Megatron's count): attention 4h^2 + 4h, layer norms 4h, MLP 8h^2 + 5h (with
  // d_ff = 4h: 2 h d_ff + d_ff + h). An MoE layer has E experts of 2 h d_ff + d_ff + h and a gate h E.
  const double attn_params = 4 * x.d * x.d + 8 * x.d;
  const double ffn_params = 2 * x.d * x.ff + x.ff + x.d;
  const double layer_params = attn_params + (m.dense() ? ffn_params : x.E * ffn_params + x.d * x.E);
  out.parameters = m.layers * layer_params + (x.V + x.s) * x.d;
  out.workload.programs.assign(plan.pipeline, StepGraph());
  for (int stage = 0; stage < plan.pipeline; ++stage) {
    StageBuilder sb(out.workload.programs[stage], x, plan, stage, lpc);
    for (const PipelineItem& it : pipeline_order(plan.schedule, plan.pipeline, mbs, plan.virtual_stages, stage))
      sb.item(it);
    // Parameters on this device: its layers (1/t each) and, on the first and last virtual
    // stages' device, the (tied) embedding's share.
    const double layers_here = double(plan.virtual_stages) * lpc;
    double dense = layers_here * (m.dense() ? layer_params : attn_params + x.d * x.E) / x.t;
    const double experts = m.dense() ? 0 : layers_here * x.local_experts() * ffn_params;
    if (stage == 0) dense += (x.V / x.t + x.s) * x.d;
    if (stage == plan.pipeline - 1 && x.V > 0 && plan.pipeline > 1) dense += x.V / x.t * x.d;
    sb.optimizer(dense, experts);
    const double ranks_per_stage = double(plan.tensor) * plan.data;
    out.executed_flops += sb.executed_flops() * ranks_per_stage;
    out.model_flops += sb.model_flops() * ranks_per_stage;
  }
  out.tokens_per_step = double(plan.global_batch) * t.seq_len;
  out.memory = worst_stage_memory(m, t, plan);
  return out;
}

}  // namespace exasim
