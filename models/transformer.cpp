#include "models/transformer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "models/graph_builder.hpp"
#include "models/pipeline_schedule.hpp"
#include "models/plan_rules.hpp"
#include "models/precision.hpp"
#include "models/tensor_parallel.hpp"
#include "models/transformer_parameters.hpp"

namespace exasim {

namespace {

using Dir = TransferWork::Direction;

struct Dims {
  double T = 0;        // tokens per micro-batch
  double b = 0;        // sequences per micro-batch
  double s = 0, d = 0, h = 0, ff = 0, V = 0;
  double t = 1;        // tensor-parallel size
  // Tensor parallelism (models/tensor_parallel.hpp): the layout, the token split (sequences per
  // device are b / tok), the head and feature split of the attention and FFN (hs: 1-D t, else
  // q), the feature split of a T x d activation (fs: 1-D 1, else q) and the parameter fraction.
  TensorLayout tl;
  double tok = 1, hs = 1, fs = 1, pf = 1;
  bool one_d() const { return tl.mode == TensorMode::one_d; }
  double Tl() const { return T / tok; }  // local token rows
  // Token rows of the activations outside the linears (layer norm, residual, dropout): Tl(), or
  // T / t under sequence parallelism (models/tensor_parallel.hpp).
  double ss = 1;
  double Ts() const { return T / ss; }
  bool sp() const { return tl.sequence_parallel && t > 1; }
  double dl() const { return d / fs; }   // local features of a T x d activation
  // MoE (E > 0): E experts, top-k routing, capacity factor cf, ep devices exchanging tokens.
  double E = 0, k = 1, cf = 1, ep = 1;
  double local_experts() const { return E / ep; }
  // Expert capacity per expert and micro-batch: the ep devices' T k routed tokens over E
  // experts, times cf (GShard); each device computes its E / ep experts on their full capacity.
  // GShard's dispatch is padded: whatever the router's skew (models/moe_routing.hpp), every
  // expert's buffer holds exactly C rows (the tokens over capacity are dropped, an under-loaded
  // expert's rows are padding), so the all-to-all bytes and the expert GEMM rows stay at capacity;
  // skew only changes how many tokens are dropped (TransformerWorkload::moe).
  // GShard's groups (models/moe_spec.hpp): S tokens a group, G = T / S groups on this device,
  // capacity C a group and expert; an expert's rows are then its ep G groups' C each.
  double S = 0, C = 0;
  bool grouped() const { return S > 0; }
  double groups() const { return T / S; }
  double capacity() const { return grouped() ? ep * groups() * C : cf * T * k * ep / E; }
  // Dropless (cf 0): no capacity; `dropless_rows` is the slots routed to this device's experts
  // (models/moe_routing.hpp), the batched expert GEMMs run their mean per local expert (same
  // FLOPs as the uneven grouped GEMM), and each device sends and receives its T k slots' rows
  // (the all-to-all's per-peer imbalance is not modelled: a collective has one size per member).
  bool dropless = false;
  double dropless_rows = 0;
  double expert_rows() const { return dropless ? dropless_rows : local_experts() * capacity(); }  // padded: cf T k
  double rows_per_expert() const { return expert_rows() / local_experts(); }
  double exchanged_rows() const { return dropless ? T * k : expert_rows(); }
  double ea = 2;       // bytes per activation element
  double es = 2;       // bytes per attention score (the logits and the softmax's probabilities)
  Precision score_elementwise = Precision::fp16;  // the softmax's (and attention dropout's) precision
  // grad_sync overlap: the data-parallel gradient reduction runs in buckets started as their
  // layers' backward finishes.
  bool overlap = false;
  bool per_tensor = false;  // grad_sync per_tensor: one all-reduce per dense gradient tensor
  bool clip_before_reduction = false;  // grad_clip before_reduction: each replica clips its own gradients
  // DeepSpeed's pipeline engine in bf16 runs its BF16_Optimizer (runtime/bf16_optimizer.py; the
  // engine: "BF16 Optimizer is hardcoded for fp32 gradient accumulation"): after every backward each
  // bf16 gradient is added into an fp32 copy, and the fp32 gradients are all-reduced at the step's end.
  bool bf16_optimizer = false;
  // DeepSpeed's engine without the BF16_Optimizer (fp16, or bf16 with plan.grad_accum_dtype bf16):
  // autograd adds each backward's 16-bit weight gradient into param.grad (grad_accumulation).
  bool autograd_accumulation = false;
  // ... and under ZeRO 1, DeepSpeed's ZeRO stage 1/2 optimizer reduces those gradients at the
  // step's end in its buckets (zero_reduce_grads).
  bool zero_bucketed_reduce = false;
  // The tied word embedding's gradient exchange between the first and the last stage
  // (WorkloadBuild::tied_grad_exchange).
  bool tied_grad_exchange = true;
  double kv = 0;         // key/value heads (grouped-query attention; = h for multi-head)
  bool swiglu = false;   // SwiGLU feed-forward: FFN1 projects to 2 d_ff (gate and up)
  bool flash = false;    // FlashAttention: the attention core is one fused kernel
  // Context parallelism: the devices of one ring ("cp"); T is this device's tokens, b s / cp.
  double cp = 1;
  bool cp_all_gather = false;  // plan.context_parallel_algorithm all_gather (else the ring)
  double dropout = 0;    // the model's dropout probability (0: no dropout kernels)
  double dh() const { return d / h; }
  // The model (its family, which layers are MoE and which decode: models/moe_spec.hpp).
  ModelSpec model;
  bool encoder_only() const { return model.architecture == ModelSpec::Architecture::encoder; }
  // Encoder-only: the masked-LM head's tokens per micro-batch (BERT's max predictions per
  // sequence, ceil(masked_fraction x s), times the sequences).
  double masked_tokens() const;
  // A device's cores (a TPU v3 chip's two TensorCores) split its tokens: each token GEMM runs
  // as `cores` products of T / cores rows (the GEMM's batch), the shape one core computes.
  int cores = 1;
  // The precision mode's row (models/precision.hpp): gemm, storage and ea are the attention's (and
  // the embedding's, the head's and the pipeline messages'); the FFN (dense or experts) computes in
  // ffn_gemm and stores in ffn_storage (ef bytes per element); the MoE gate in gate_gemm.
  PrecisionPlan pp{};
  Precision gemm = Precision::fp16, storage = Precision::fp16, elementwise = Precision::fp16;
  Precision ffn_gemm = Precision::fp16, ffn_storage = Precision::fp16, gate_gemm = Precision::fp32;
  double ef = 2;
  // fp8 (Transformer Engine): the transformer layers' linears run their GEMMs in fp8; the
  // attention core, the logits and the experts stay in the row's precisions.
  bool fp8 = false;
  Optimizer optimizer = Optimizer::adam;
};

double Dims::masked_tokens() const { return std::ceil(model.masked_fraction * s) * b; }

// A token GEMM's shape as one of the device's `cores` computes it: its rows (m, or the
// contraction k of a weight gradient) split over the cores, the cores as the batch.
KernelShape per_core(KernelShape g, int cores, int token_dim) {
  if (cores <= 1) return g;
  g.dims[token_dim] /= cores;
  g.batch *= cores;
  return g;
}

// One pipeline stage's program: a chain of the device's ops in schedule order.
class StageBuilder {
 public:
  // layers: the model's (chunks may differ by one layer: layers_on_chunk).
  // micro_batches: the ones built (fewer than the plan's when folded in time).
  StageBuilder(StepGraph& g, const Dims& x, const ParallelPlan& plan, int stage, int layers, int micro_batches)
      : b_(g), x_(x), plan_(plan), stage_(stage), layers_(layers), vt_(plan.pipeline * plan.virtual_stages),
        micro_batches_(micro_batches),
        qkv_(tensor_linear(x.tl, x.T, x.d, x.d + 2 * x.kv * x.dh(), x.ea, Linear1D::column)),
        proj_(tensor_linear(x.tl, x.T, x.d, x.d, x.ea, Linear1D::row)),
        ffn1_(tensor_linear(x.tl, x.T, x.d, (x.swiglu ? 2 : 1) * x.ff, x.ef, Linear1D::column)),
        ffn2_(tensor_linear(x.tl, x.T, x.ff, x.d, x.ef, Linear1D::row)),
        logits_(tensor_linear(x.tl, x.encoder_only() ? x.masked_tokens() : x.T, x.d, x.V, x.ea, Linear1D::column)),
        cross_q_(tensor_linear(x.tl, x.T, x.d, x.d, x.ea, Linear1D::column)),
        cross_kv_(tensor_linear(x.tl, x.T, x.d, 2 * x.kv * x.dh(), x.ea, Linear1D::column)) {}

  // One item of the schedule; `exchanges`: with its receive before and its send after (Megatron's
  // engine), or its compute alone (DeepSpeed's, whose exchanges are instructions of their own).
  void item(const PipelineItem& it, bool exchanges = true) {
    const int vs = it.chunk * plan_.pipeline + stage_;  // virtual stage
    mb_ = fmt::format("mb{}.c{}.", it.micro_batch, it.chunk);
    if (it.forward) {
      if (vs > 0 && exchanges) receive(Phase::forward, tag(it.micro_batch, vs - 1, true), +1);
      if (vs == 0) embedding(Phase::forward);
      for (int l = 0; l < chunk_layers(vs); ++l) {
        if (starts_decoder(layer_index(vs, l))) decoder_input(Phase::forward);
        if (it.micro_batch == 0) prefetched_param_gather(layer_index(vs, l));
        layer_forward(layer_index(vs, l), Phase::forward, false);
      }
      if (vs == vt_ - 1) head_forward();
      amax_reduction(chunk_layers(vs));
      if (vs < vt_ - 1 && exchanges) send(Phase::forward, tag(it.micro_batch, vs, true), +1);
    } else {
      if (vs < vt_ - 1 && exchanges) receive(Phase::backward, tag(it.micro_batch, vs + 1, false), -1);
      if (vs == vt_ - 1) head_backward();
      const bool last_micro_batch = it.micro_batch == micro_batches_ - 1;
      for (int l = chunk_layers(vs) - 1; l >= 0; --l) {
        const int layer = layer_index(vs, l);
        if (plan_.recompute == Recompute::full) {
          // distribute_saved_activations: the kept 1/t of the input gathered back first
          // (Megatron's CheckpointFunction.backward, gather_split_1d_tensor).
          if (plan_.distribute_saved_activations)
            last_ = b_.collective(name(fmt::format("L{}.saved_input_all_gather", layer)), "saved_input_all_gather",
                                  Phase::backward, CollectiveKind::all_gather, CollectiveAlgorithm::ring, "tp",
                                  x_.T * x_.d * x_.ea, deps());
          b_.set_recomputing(true);
          layer_forward(layer, Phase::backward, true);
          b_.set_recomputing(false);
        }
        layer_backward(layer);
        if (last_micro_batch)
          layer_gradients_ready(layer);
        else if (plan_.reduce_scatter_per_micro_batch)
          micro_batch_gradients_ready(layer);
        if (starts_decoder(layer)) decoder_input(Phase::backward);
      }
      if (vs == 0) embedding(Phase::backward);
      if (vs > 0 && exchanges) send(Phase::backward, tag(it.micro_batch, vs, false), -1);
    }
  }

  // The dense parameters on this device (BF16_Optimizer's fp32 gradient accumulation passes over them).
  void set_stage_dense_params(double params) { stage_dense_params_ = params; }
  // Those of them in Megatron's group without weight decay (biases, layer norms): BF16_Optimizer's
  // second flat gradient buffer (bf16_reduce_grads).
  void set_stage_no_decay_params(double params) { stage_no_decay_params_ = params; }
  // BF16_Optimizer.update_hp_grads after each backward, per parameter hp_grad.add_(lp.grad.to(fp32)):
  // the cast (bf16 read, fp32 temporary written) and the add (temporary and accumulator read,
  // accumulator written), 18 bytes a parameter.
  void hp_grad_accumulation() {
    if (!x_.bf16_optimizer || stage_dense_params_ <= 0) return;
    const double n = stage_dense_params_;
    last_ = b_.memory(name("hp_grad_cast"), "hp_grad_cast", Phase::backward, Kernel::residual_add, Precision::fp32,
                      elements(n), 0, n * 6, deps());
    last_ = b_.memory(name("hp_grad_add"), "hp_grad_add", Phase::backward, Kernel::residual_add, Precision::fp32,
                      elements(n), n, n * 12, deps());
  }

  // Without the BF16_Optimizer, DeepSpeed's engine leaves the accumulation to autograd: a backward
  // after the first (whose gradient becomes param.grad as it is) ends in AccumulateGrad's in-place
  // param.grad += new_grad on every weight, 16-bit (both read, the sum written: 6 bytes a parameter).
  void grad_accumulation(int micro_batch) {
    if (!x_.autograd_accumulation || micro_batch == 0 || stage_dense_params_ <= 0) return;
    const double n = stage_dense_params_, e = bytes_per_element(x_.pp.shared_grad);
    last_ = b_.memory(name("grad_accumulate"), "grad_accumulate", Phase::backward, Kernel::residual_add,
                      x_.pp.shared_grad, elements(n), n, n * 3 * e, deps());
  }

  // One instruction of DeepSpeed's TrainSchedule (models/pipeline_schedule.hpp; one chunk a stage).
  void deepspeed_instruction(const DeepSpeedInstruction& in) {
    using K = DeepSpeedInstruction::Kind;
    const int mb = in.micro_batch;
    mb_ = fmt::format("mb{}.c0.", mb);
    switch (in.kind) {
      case K::forward: return item({true, mb, 0}, false);
      case K::backward:
        item({false, mb, 0}, false);
        grad_accumulation(mb);
        return hp_grad_accumulation();
      case K::recv_activation: return blocking_receive(Phase::forward, tag(mb, stage_ - 1, true), +1);
      case K::send_grad: return blocking_send(Phase::backward, tag(mb, stage_, false), -1);
      case K::send_activation: return blocking_send(Phase::forward, tag(mb, stage_, true), +1);
      case K::recv_grad: return blocking_receive(Phase::backward, tag(mb, stage_ + 1, false), -1);
    }
  }

  // Gradient reduction and optimizer update of this device's parameters, after its last
  // backward: the dense parameters among the data-parallel replicas ("dp"), the experts'
  // among the replicas that hold the same experts ("expert_dp").
  // Under 2.5-D the d depth layers hold the same weights and each computed the gradient of its
  // rows of the batch: the dense gradients are first all-reduced over "tp_depth".
  void optimizer(double dense_params, double expert_params) {
    if (plan_.supernode_ranks > 0) return layered_updates(dense_params, expert_params);
    if (gathers_rotated() && dense_params > bucketed_params_)  // the embeddings' gather, from the step's start
      background_.push_back(b_.collective("dense.opt.param_all_gather", "param_all_gather", Phase::optimizer,
                                          CollectiveKind::all_gather, CollectiveAlgorithm::ring, "dp",
                                          (dense_params - bucketed_params_) * bytes_per_element(x_.storage), {-1}));
    std::vector<long> done = all_done();
    if (plan_.pipeline_engine == PipelineEngine::deepspeed)  // ReduceTiedGrads, before the reduction
      done = tied_grad_all_reduce(x_.bf16_optimizer ? 4.0 : bytes_per_element(x_.pp.shared_grad), done);
    long after = -1;
    if (x_.tl.mode == TensorMode::two_half_d && x_.tl.depth > 1 && dense_params > 0)
      done.push_back(b_.collective("dense.grad.depth_all_reduce", "grad_depth_all_reduce", Phase::backward,
                                   CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "tp_depth",
                                   dense_params * x_.ea, done));
    if (bucketed()) {  // the parameters outside the layers (embedding, head) in a last bucket
      bucket_params_ += dense_params - bucketed_params_;
      bucket_ready_ = done;
      flush_bucket();
    }
    after = update("dense", "dp", plan_.gradient_replicas(), dense_params, done, after, bucketed() ? &buckets_ : nullptr);
    update("expert", "expert_dp", plan_.data / plan_.expert, expert_params, done, after);
  }

  double executed_flops() const { return b_.executed_flops(); }
  double model_flops() const { return b_.model_flops(); }
  double recomputed_model_flops() const { return b_.recomputed_model_flops(); }
  double masked_attention_model_flops() const { return b_.masked_attention_model_flops(); }
  long ops() const { return b_.ops(); }

 private:
  // Encoder-decoder: the first decoder layer, where the encoder's output gets its final layer
  // norm (kept for the cross-attentions) and the decoder's tokens their embedding.
  bool starts_decoder(int layer) const { return x_.model.is_decoder_layer(layer) && layer == x_.model.layers; }
  void decoder_input(Phase ph) {
    const double Ts = x_.Ts(), dl = x_.dl();
    const bool F = ph == Phase::forward;
    special_function(name(F ? "encoder_layernorm" : "encoder_layernorm.bwd"), F ? "final_layernorm" : "final_layernorm.bwd", ph,
                     {Kernel::layer_norm, x_.elementwise, x_.storage, rows_cols(Ts, dl), 8 * Ts * dl, Ts, dl, F ? 1 : 2, 1, F ? 0 : 1});
    last_ = b_.memory(name(F ? "decoder_embedding" : "decoder_embedding.bwd"), F ? "embedding" : "embedding.bwd", ph,
                      Kernel::token_permute, x_.storage, rows_cols(Ts, dl), 0, (F ? 2 : 3) * Ts * dl * x_.ea, deps());
  }
  double layer_dense_params(int layer) const { return layer_dense_parameters(x_.model, layer) * x_.pf; }
  // The MoE gate's share of a layer's dense parameters (d x E), kept apart where the precision
  // mode runs the gate with the FFN (PrecisionPlan::gate_with_ffn), else 0.
  double layer_gate_params(int layer) const {
    if (!x_.pp.gate_with_ffn || !x_.model.is_moe_layer(layer)) return 0;
    return double(x_.model.d_model) * x_.model.experts_per_layer * x_.pf;
  }
  int layer_index(int vs, int l) const { return first_layer_of_chunk(layers_, plan_, vs) + l; }
  int chunk_layers(int vs) const { return layers_on_chunk(layers_, plan_, vs); }

  // BaGuaLu's reduction and update (supernode_ranks > 0), layer by layer in backward order. The
  // experts' gradients are reduced among each expert's replicas ("expert_dp"): with ParO
  // reduce-scattered, the shard updated and the parameters all-gathered; without, all-reduced.
  // The dense (attention, gate, norm) gradients hierarchically: reduce-scatter inside the
  // supernode, all-reduce across supernodes, and (without ParO) all-gather inside; ParO updates
  // the supernode shard and all-gathers the parameters. ParO is the optimizer: its collectives
  // are in the optimizer phase (BaGuaLu Figure 18: backward communication is the backward
  // all-to-alls alone); without ParO the reductions are the backward pass's. after_backward:
  // the reductions start when the whole backward pass is done; overlap: a layer's reductions
  // start as soon as its own backward is done, one after another. The updates wait for the whole
  // backward pass either way. An expert update and the expert rings take turns: the CPE clusters'
  // DMA and the network interface share the node's memory path (the machine's noc link: noc_Bps is
  // the achieved DMA bandwidth), the update streams at that rate and the rings inside a supernode
  // are NoC-bound above noc_Bps / 2, so a layer's expert update waits for the previous layer's
  // expert all-gather and the next layer's expert reduce-scatter waits for it. The dense
  // reductions (a few hundred MB over 240 ranks, bound by their steps' latency) still overlap it.
  void layered_updates(double dense_params, double expert_params) {
    const int replicas = plan_.data / plan_.expert;
    const bool paro = plan_.paro && replicas > 1;
    const double K = plan_.supernode_ranks, layers = static_cast<double>(layer_done_.size());
    double layers_dense = 0;  // the layers' dense parameters; the last layer's update adds the rest
    for (const auto& done_layer : layer_done_) layers_dense += layer_dense_params(done_layer.first);
    const PrecisionPlan& pp = x_.pp;
    const double eg = bytes_per_element(pp.expert_grad), ep = bytes_per_element(pp.expert_param);
    const double sg = bytes_per_element(pp.shared_grad), sp = bytes_per_element(pp.shared_param);
    const Phase G = paro ? Phase::optimizer : Phase::backward;
    const std::vector<long> done = all_done();
    const bool overlap = x_.overlap;
    long comm = -1, adam = -1, expert_adam = -1, expert_gather = -1;
    for (const auto& [l, layer_last] : layer_done_) {
      const std::string p = fmt::format("L{}.opt.", l), gp = fmt::format("L{}.grad.", l);
      std::vector<long> ready = overlap ? std::vector<long>{layer_last} : done;
      const double dense = layer_dense_params(l) + (l == layer_done_.back().first ? dense_params - layers_dense : 0);
      const double gate = layer_gate_params(l);  // half with a master copy under layerwise, else 0
      const double gg = bytes_per_element(gate_grad(pp)), gpb = bytes_per_element(gate_param(pp));
      const double dense_grad_bytes = (dense - gate) * sg + gate * gg, dense_param_bytes = (dense - gate) * sp + gate * gpb;
      const double experts = expert_params / layers;
      std::vector<long> expert_ready = done, after = ready;
      after.insert(after.end(), {comm, expert_adam});
      double expert_shard = experts;
      if (replicas > 1 && experts > 0) {
        comm = b_.collective(gp + (paro ? "expert_grad_reduce_scatter" : "expert_grad_all_reduce"),
                             paro ? "expert_grad_reduce_scatter" : "expert_grad_all_reduce", G,
                             paro ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce, CollectiveAlgorithm::ring,
                             "expert_dp", experts * eg, after);
        if (paro) expert_shard = experts / replicas;
        expert_ready.push_back(comm);
        after = ready;
        after.push_back(comm);
      }
      comm = b_.collective(gp + "shared_grad_reduce_scatter", "shared_grad_reduce_scatter", G,
                           CollectiveKind::reduce_scatter, CollectiveAlgorithm::ring, "supernode", dense_grad_bytes, after);
      comm = b_.collective(gp + "shared_grad_all_reduce", "shared_grad_all_reduce", G, CollectiveKind::all_reduce,
                           CollectiveAlgorithm::ring, "across_supernodes", dense_grad_bytes / K, {comm});
      if (!paro)
        comm = b_.collective(gp + "shared_grad_all_gather", "shared_grad_all_gather", G, CollectiveKind::all_gather,
                             CollectiveAlgorithm::ring, "supernode", dense_grad_bytes, {comm});
      expert_ready.insert(expert_ready.end(), {adam, expert_gather});
      adam = expert_adam = master_update(p + "expert", pp.expert_master_bytes, eg, ep, expert_shard, expert_ready);
      if (paro)
        expert_gather = b_.collective(p + "expert_param_all_gather", "expert_param_all_gather", Phase::optimizer,
                      CollectiveKind::all_gather, CollectiveAlgorithm::ring, "expert_dp", experts * ep, {adam});
      std::vector<long> shared_ready = done;
      shared_ready.insert(shared_ready.end(), {adam, comm});
      adam = master_update(p + "shared", pp.shared_master_bytes, sg, sp, (paro ? 1 / K : 1) * (dense - gate), shared_ready);
      if (gate > 0)
        adam = master_update(p + "gate", gate_master_bytes(pp), gg, gpb, (paro ? 1 / K : 1) * gate, {adam});
      if (paro)
        b_.collective(p + "shared_param_all_gather", "shared_param_all_gather", Phase::optimizer,
                      CollectiveKind::all_gather, CollectiveAlgorithm::ring, "supernode", dense_param_bytes, {adam});
    }
  }
  // The update rule's passes on `shard` fp32 parameters (models/moe_spec.hpp Optimizer), per parameter:
  //   adam       the adam kernel, one pass (12 flops, 28 bytes: read g, w, m, v, write w, m, v)
  //   lamb       the adam kernel's moments, writing the update u in place of w (12 flops, 28 bytes);
  //              the two norms of each layer, ||w|| and ||u||, in one pass (read w and u: 4 flops,
  //              8 bytes); the trust-ratio step w -= lr (||w|| / ||u||) u (read w and u, write w:
  //              2 flops, 12 bytes)
  //   adafactor  beta1 0, factored second moments: g^2 + eps summed along rows and columns (read g:
  //              4 flops, 4 bytes; the row and column vectors are negligible); the update
  //              u = g r_i c_j (r, c: the factored 1 / sqrt of the second moment) with the sums of u^2
  //              and of w^2 for clipping and the parameter scale (read g and w: 6 flops, 8 bytes); the
  //              step w -= lr max(eps2, RMS(w)) u / max(1, RMS(u)), u recomputed (read w and g, write w:
  //              4 flops, 12 bytes)
  // Each is one memory-bound kernel at the streaming (residual add) efficiency but the adam kernel's.
  long optimizer_step(const std::string& name, const std::string& label, double shard, std::vector<long> after) {
    if (x_.optimizer == Optimizer::adam) return b_.optimizer_update(name, label, shard, after);
    // (standalone: passes over whole tensors, which a fusing compiler has no producer to fold into)
    const auto pass = [&](const char* what, double flops, double bytes) {
      after = {b_.standalone_pass(name + what, label + what, Phase::optimizer, shard, flops * shard, bytes * shard, after)};
    };
    if (x_.optimizer == Optimizer::lamb) {
      after = {b_.optimizer_update(name + ".lamb_moments", label + ".lamb_moments", shard, after)};
      pass(".lamb_norms", 4, 8);
      // Under weight-update sharding each replica holds a slice of every tensor: its sums of w^2 and
      // u^2 are partial, and the per-tensor norms need an all-reduce of those sums over the
      // replicas before the trust ratios (MLPerf v0.7's BERT on the TPU multipod: LAMB with
      // enable_wus, its norms per tensor and per layer, bert_lamb.py). XLA's all-reduce combiner
      // merges the small reductions into one: two fp32 sums per norm group, latency-bound.
      if (!sharded_role_.empty())
        after = {b_.collective(name + ".lamb_norm_all_reduce", label + ".lamb_norm_all_reduce", Phase::optimizer,
                               CollectiveKind::all_reduce, CollectiveAlgorithm::ring, sharded_role_,
                               2 * 4 * lamb_norm_groups(x_.model), after)};
      pass(".lamb_step", 2, 12);
    } else {
      pass(".adafactor_moments", 4, 4);
      pass(".adafactor_rms", 6, 8);
      pass(".adafactor_step", 4, 12);
    }
    return after[0];
  }
  // Adam on `shard` parameters named `what` ("L3.opt.expert"), with APEX O2's passes where the
  // mode keeps fp32 master weights: the reduced half gradients unscaled into fp32 master
  // gradients, and the updated master weights copied back into the model's half weights.
  long master_update(const std::string& what, double master_bytes, double grad_bytes, double param_bytes, double shard,
                     std::vector<long> after) {
    const std::string label = what.substr(what.rfind('.') + 1);
    const bool passes = x_.pp.master_passes && master_bytes > 0;
    // Dynamic loss scaling without a master copy: unscale the gradient in place and check it for
    // inf/NaN (read and write it). With one, the master-gradient pass does both.
    if (x_.pp.loss_scaling && !passes)
      after = {b_.memory(what + "_unscale", label + "_unscale", Phase::optimizer, Kernel::residual_add, Precision::fp32,
                         elements(shard), shard, shard * 2 * grad_bytes, after)};
    if (passes)
      after = {b_.memory(what + "_master_grad", label + "_master_grad", Phase::optimizer, Kernel::residual_add,
                         Precision::fp32, elements(shard), shard, shard * (grad_bytes + 4), after)};
    long adam = optimizer_step(what + "_adam", label + "_adam", shard, after);
    if (passes)
      adam = b_.memory(what + "_master_to_model", label + "_master_to_model", Phase::optimizer, Kernel::residual_add,
                       Precision::fp32, elements(shard), 0, shard * (4 + param_bytes), {adam});
    return adam;
  }
  // Megatron-LM's mixed-precision optimizer step (Float16OptimizerWithFloat16Params.step) on `shard`
  // parameters, for the fp16, bf16 and fp8 rows (main_grad_step): the half gradients copied into fp32
  // main gradients, those unscaled and checked for inf/NaN (fp16's dynamic loss scaling only:
  // loss_scaling), read once for their norm (gradient clipping), Adam, the master weights copied
  // into the half model weights, and the half gradient buffer zeroed for the next step.
  long main_grad_update(const std::string& what, double grad_bytes, double param_bytes, double shard,
                        std::vector<long> after) {
    const std::string label = what.substr(what.rfind('.') + 1);
    const auto pass = [&](const std::string& name, double flops, double bytes) {
      after = {b_.memory(what + name, label + name, Phase::optimizer, Kernel::residual_add, Precision::fp32,
                         elements(shard), flops, bytes, after)};
    };
    pass("_main_grad", 0, shard * (grad_bytes + 4));
    if (x_.pp.loss_scaling) pass("_unscale", shard, shard * 8);
    if (!x_.clip_before_reduction) pass("_grad_norm", 2 * shard, shard * 4);  // clipped locally instead
    after = {optimizer_step(what + "_adam", label + "_adam", shard, after)};
    pass("_master_to_model", 0, shard * (4 + param_bytes));
    pass("_zero_grad", 0, shard * grad_bytes);
    return after[0];
  }
  // grad_clip before_reduction: each replica clips its own gradients by their global norm before
  // the cross-replica sum (google-research/bert optimization.py: tf.clip_by_global_norm, then
  // CrossShardOptimizer's cross_replica_sums; MLPerf v0.7 Google BERT: the JAX train_step's
  // clip_by_global_normal before lax.psum, the TF 2 _compiled_local_step's clip before the
  // strategy's implicit all-reduce). On a TPU every TensorCore is a replica (TPUEstimator's
  // shards, JAX's devices and TPUStrategy's replicas are cores), so a device of `cores` cores
  // clips `cores` whole gradients of `params` elements. Per gradient, two memory-bound passes: the
  // sum of squares (read g: 2 flops an element) and the scale g min(1, c / ||g||) written in the
  // reduction's precision, `reduce_bytes` an element (read g, write it: 1 flop; the cast to a
  // bf16 reduction is fused into it). The local gradient is in its variable's precision: fp32
  // where the mode keeps fp32 master weights (the variables of TF's bfloat16 getter, Flax's fp32
  // parameters, Keras's mixed_bfloat16), else the gradient's. Returns the scale pass.
  std::vector<long> local_clip(const std::string& group, double params, double reduce_bytes, std::vector<long> after) {
    const double n = params * x_.cores;
    const double local_bytes = x_.pp.shared_master_bytes > 0 ? 4.0 : bytes_per_element(x_.pp.shared_grad);
    const auto pass = [&](const char* what, double flops, double bytes) {
      after = {b_.standalone_pass(group + ".grad." + what, std::string("grad_") + what, Phase::backward, n, flops * n,
                                  bytes * n, after)};
    };
    pass("clip_norm", 2, local_bytes);
    pass("clip_scale", 1, local_bytes + reduce_bytes);
    return after;
  }
  // The copies of a parameter group one device updates when no weight-update sharding splits it. A
  // device of `cores` cores that are each a data-parallel replica (a TPU v3 chip's two TensorCores:
  // TPUEstimator's shards, TPUStrategy's replicas, JAX's devices and GShard's SPMD partitions are
  // cores) keeps a copy of the replicated parameters on every core, and every core applies the
  // whole update to its own (tensorflow tpu_optimizer.py CrossShardOptimizer: cross_replica_sum,
  // then the wrapped optimizer's apply_gradients on each shard; Keras OptimizerV2 under
  // TPUStrategy the same), so the device streams the update `cores` times. Expert parameters are
  // already per core (one expert, or a slice, a core), and weight-update sharding (ZeRO 1) splits
  // the replicated ones over every core of the group, a device's share being params / replicas.
  double replica_copies(bool experts) const { return experts ? 1.0 : double(x_.cores); }
  // One parameter group's reduction (all-reduce, or reduce-scatter under ZeRO), Adam on the
  // local shard, and (ZeRO 1, 2) the all-gather of the updated parameters. Returns the Adam op.
  // `reduced`: the gradients were already reduced by these collectives (grad_sync overlap's buckets).
  long update(const std::string& group, const std::string& role, int replicas, double params,
              const std::vector<long>& done, long after, const std::vector<long>* reduced = nullptr) {
    if (params <= 0) return after;
    const Phase G = Phase::backward, O = Phase::optimizer;
    const bool experts = group == "expert";
    const double grad_bytes =
        params * (plan_.grad_reduce_in_fp32 || x_.bf16_optimizer ? 4.0
                                                                 : bytes_per_element(experts ? x_.pp.expert_grad : x_.pp.shared_grad));
    const Precision param_precision = experts ? x_.pp.expert_param : x_.pp.shared_param;
    const double master_bytes = experts ? x_.pp.expert_master_bytes : x_.pp.shared_master_bytes;
    std::vector<long> adam_deps = done;
    adam_deps.push_back(after);
    const bool zero = plan_.zero_stage >= 1;
    const double shard = zero ? params / std::max(replicas, 1) : params * replica_copies(experts);
    sharded_role_ = replicas > 1 && zero ? role : std::string();
    const std::vector<long> clipped = replicas > 1 && x_.clip_before_reduction && !experts && !reduced
                                          ? local_clip(group, params, grad_bytes / params, done)
                                          : done;
    if (reduced) {
      adam_deps.insert(adam_deps.end(), reduced->begin(), reduced->end());
    } else if (replicas > 1 && x_.per_tensor && !experts) {
      adam_deps.push_back(per_tensor_all_reduces(role, bytes_per_element(x_.pp.shared_grad), clipped));
    } else if (replicas > 1 && x_.bf16_optimizer && !experts) {
      adam_deps.push_back(bf16_reduce_grads(group, role, params, clipped));
    } else if (replicas > 1 && x_.zero_bucketed_reduce && !experts) {
      adam_deps.push_back(zero_reduce_grads(role, params, clipped));
    } else if (replicas > 1) {
      // BF16_Optimizer all-reduces its fp32 gradients (bf16_reduce_grads for the dense ones), ZeRO 1
      // or not; each replica then updates its shard.
      const bool scatter = zero && !x_.bf16_optimizer;
      adam_deps.push_back(b_.collective(group + ".grad." + (scatter ? "reduce_scatter" : "all_reduce"),
                                        std::string("grad_") + (scatter ? "reduce_scatter" : "all_reduce"), G,
                                        scatter ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce,
                                        CollectiveAlgorithm::ring, role, grad_bytes, clipped));
    }
    // Megatron's engine: the tied embedding's gradient, after the data-parallel reduction and before
    // the optimizer step (tied_grad_all_reduce).
    if (!experts && plan_.pipeline_engine == PipelineEngine::megatron)
      adam_deps = tied_grad_all_reduce(grad_bytes / params, adam_deps);
    const long adam = plan_.offload_optimizer ? offloaded_update(group, shard, adam_deps)
                      : x_.pp.master_passes ? master_update(group + ".opt." + group, master_bytes, grad_bytes / params,
                                                            bytes_per_element(param_precision), shard, adam_deps)
                      : x_.pp.main_grad_step ? main_grad_update(group + ".opt." + group, grad_bytes / params,
                                                                bytes_per_element(param_precision), shard, adam_deps)
                                             : optimizer_step(group + ".opt.adam", "adam", shard, adam_deps);
    // ZeRO 1 and 2 all-gather the updated parameters; ZeRO 3 keeps each shard and gathers a layer's
    // parameters before its forward and its backward instead (zero3_gather). Under grad_sync
    // overlap the dense parameters' gathers run at the step's start instead, overlapped with the
    // forward (prefetched_param_gather).
    if (replicas > 1 && (plan_.zero_stage == 1 || plan_.zero_stage == 2) && !(reduced && gathers_rotated()))
      b_.collective(group + ".opt.param_all_gather", "param_all_gather", O, CollectiveKind::all_gather,
                    CollectiveAlgorithm::ring, role, params * bytes_per_element(param_precision), {adam});
    return adam;
  }
  // BF16_Optimizer's gradient reduction as DeepSpeed's pipeline engine runs it (pipe/engine.py
  // _exec_reduce_grads -> _bf16_reduce_grads -> engine.py buffered_allreduce_fallback(grads=
  // optimizer.get_grads_for_reduction(), elements_per_buffer=MEMORY_OPT_ALLREDUCE_SIZE)): the
  // tensors are the optimizer's flat fp32 gradient buffers, one per parameter group (Megatron's two:
  // the weights, with weight decay; the biases and layer norms, without), bucketed whole
  // (deepspeed_allreduce_buckets, models/pipeline_schedule.hpp). Per bucket, one after another on
  // the default stream (allreduce_and_copy, allreduce_bucket): the flatten (a lone tensor is viewed,
  // torch's flatten_dense_tensors; several are concatenated, read and written), the fp32 all-reduce
  // over the replicas, the post-scale by 1/d (postscale_gradients with predivide factor 1: mul_, read
  // and written) and the copy back (onto the same data for a lone tensor: copy_ returns at once;
  // several: read and written). Returns the last op.
  long bf16_reduce_grads(const std::string& group, const std::string& role, double params, std::vector<long> after) {
    const double no_decay = std::min(stage_no_decay_params_, params);
    return bucket_all_reduces(group, role, deepspeed_allreduce_buckets({params - no_decay, no_decay}), 4.0, false,
                              std::move(after));
  }
  // DeepSpeed's bucket reductions, one bucket after another on the default stream (engine.py
  // allreduce_and_copy, allreduce_bucket; zero/stage2.py the same names): the flatten (a lone tensor
  // is viewed, torch's flatten_dense_tensors; several are concatenated, read and written), the scale
  // by 1/d (read and written: after the all-reduce, the engine's postscale_gradients; before it,
  // `prescale`, the ZeRO optimizer's div_), the all-reduce of `element_bytes` an element over the
  // replicas and the copy back (onto the same data for a lone tensor: copy_ returns at once;
  // several: read and written). Returns the last op.
  long bucket_all_reduces(const std::string& group, const std::string& role, const std::vector<DeepSpeedBucket>& buckets,
                          double element_bytes, bool prescale, std::vector<long> after) {
    const Phase G = Phase::backward;
    const Precision pass_precision = element_bytes >= 4 ? Precision::fp32 : x_.pp.shared_grad;
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      const double n = buckets[i].elements;
      if (n <= 0) continue;
      const std::string p = fmt::format("{}.grad.bucket{}.", group, i);
      const bool several = buckets[i].tensors > 1;
      const auto pass = [&](const std::string& what, double flops) {
        after = {b_.memory(p + what, "grad_" + what, G, Kernel::residual_add, pass_precision, elements(n), flops,
                           2 * element_bytes * n, after)};
      };
      if (several) pass("flatten", 0);
      if (prescale) pass("prescale", n);
      after = {b_.collective(p + "all_reduce", "grad_all_reduce", G, CollectiveKind::all_reduce,
                             CollectiveAlgorithm::ring, role, element_bytes * n, after)};
      if (!prescale) pass("postscale", n);
      if (several) pass("copy_back", 0);
    }
    return after.at(0);
  }
  // DeepSpeed's ZeRO stage 1 optimizer as its pipeline engine runs it (pipe/engine.py
  // _exec_reduce_grads -> engine.py allreduce_gradients -> zero/stage2.py reduce_gradients(
  // pipeline_parallel=True)): stage 1 runs without overlap_comm and contiguous_gradients (the engine
  // turns both off for stage 1), so each bucket of the 16-bit parameter gradients
  // (deepspeed_zero_buckets: the weight group's, then the biases' and layer norms', in order) is
  // reduced by buffered_reduce_fallback(None, ...) -> allreduce_and_copy: flattened, divided by d,
  // all-reduced in its own dtype and copied back; each replica then copies its partition into fp32
  // for its update. Returns the last op.
  long zero_reduce_grads(const std::string& role, double params, std::vector<long> after) {
    return bucket_all_reduces("dense", role, deepspeed_zero_buckets(stage_gradient_tensors(params)),
                              bytes_per_element(x_.pp.shared_grad), true, std::move(after));
  }
  // This device's dense gradient tensors in DeepSpeed's order (Megatron's two parameter groups: the
  // weights, then the biases and layer norms), the tensors of its layers and embeddings at 1/t
  // each (models/transformer_parameters.hpp), each group scaled to its exact total (`params`, of
  // which stage_no_decay_params_ without weight decay): the sizes set only where buckets close.
  std::vector<double> stage_gradient_tensors(double params) const {
    std::vector<double> weights, others;
    const double widest_vector = std::max(x_.model.d_model, x_.model.d_ff);
    const int first = first_layer_of_chunk(layers_, plan_, stage_), last = first_layer_of_chunk(layers_, plan_, stage_ + 1);
    for (int l = first; l < last; ++l)
      for (double n : layer_gradient_tensor_parameters(x_.model, l)) (n > widest_vector ? weights : others).push_back(n);
    if (x_.V > 0 && (stage_ == 0 || stage_ == plan_.pipeline - 1)) weights.push_back(x_.V * x_.d);
    const double no_decay = std::min(stage_no_decay_params_, params);
    const auto scaled = [](std::vector<double> v, double total) {
      double sum = 0;
      for (double n : v) sum += n;
      if (v.empty() && total > 0) v.push_back(total);
      else for (double& n : v) n = sum > 0 ? n * total / sum : 0;
      return v;
    };
    std::vector<double> out = scaled(weights, params - no_decay);
    const std::vector<double> rest = scaled(others, no_decay);
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
  }
  // The tied word embedding's gradient (V x d / t elements of `grad_bytes_per_param` bytes)
  // all-reduced between the first and the last stage, the tie's group of two, as NCCL's ring of two
  // runs it: two steps (reduce-scatter, all-gather), in each the two ranks exchange half the buffer.
  // Each stage's exchange starts after `after`; returns the last transfers (`after` itself where the
  // stage has no part in it). Where each engine places it:
  //  * DeepSpeed's ReduceTiedGrads (pipe/engine.py _exec_reduce_tied_grads), the instruction before
  //    the data-parallel reduction, on the gradient as the optimizer holds it (under BF16_Optimizer
  //    its fp32 copy, weight._hp_grad);
  //  * Megatron-LM (2021 training.py train_step: after the data-parallel allreduce_gradients,
  //    all_reduce(word_embeddings.weight.main_grad, group=get_embedding_group()); Megatron-Core's
  //    finalize_model_grads: finish_grad_sync, then _allreduce_embedding_grads), after the
  //    data-parallel reduction and before the optimizer step, on main_grad in the precision of that
  //    reduction.
  std::vector<long> tied_grad_all_reduce(double grad_bytes_per_param, std::vector<long> after) {
    const int p = plan_.pipeline;
    if (!x_.tied_grad_exchange || p < 2 || !x_.model.tied_embeddings || x_.V <= 0 || (stage_ != 0 && stage_ != p - 1))
      return after;
    const double bytes = x_.V * x_.d * x_.pf * grad_bytes_per_param;
    const int offset = stage_ == 0 ? p - 1 : -(p - 1);  // to the peer; a receive names the message's (-offset)
    for (int step = 0; step < 2; ++step) {
      const std::string n = fmt::format("tied.grad.all_reduce.step{}.", step);
      const long sent = b_.transfer(n + "send", "tied_grad_send", Phase::backward, Dir::send, "pp", offset, bytes / 2,
                                    kTiedTagBase + step, after);
      const long received = b_.transfer(n + "recv", "tied_grad_recv", Phase::backward, Dir::recv, "pp", -offset,
                                        bytes / 2, kTiedTagBase + step, after);
      after = {sent, received};
    }
    return after;
  }
  // grad_sync per_tensor (TensorFlow 1.x's CrossShardOptimizer.apply_gradients on a TPU: one
  // cross_replica_sum per gradient tensor): each dense gradient tensor its own all-reduce over
  // `role`, in the order the backward produced them, one after another on the one communication
  // stream after the backward, each paying its algorithm's steps' latencies (on the torus: 2 (x-1 +
  // y-1) steps). The plan rules keep it to data-parallel plans of dense models (the device holds
  // whole tensors). Returns the last all-reduce.
  long per_tensor_all_reduces(const std::string& role, double grad_bytes_per_param, const std::vector<long>& done) {
    std::vector<long> deps = done;
    long last = -1;
    const std::vector<double> tensors = gradient_tensor_parameters(x_.model, x_.s);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      last = b_.collective(fmt::format("dense.grad.tensor{}.all_reduce", i), "grad_all_reduce", Phase::backward,
                           CollectiveKind::all_reduce, CollectiveAlgorithm::ring, role,
                           tensors[i] * grad_bytes_per_param, deps);
      deps = {last};
    }
    return last;
  }
  // Optimizer offload (ZeRO-Offload, M6-10T): the device's optimizer state lives in host memory
  // and the host CPU runs Adam; the device runs no optimizer kernel. After the reduction, the
  // device copies its reduced gradient shard to the host over the host link (storage precision:
  // 2 bytes per parameter in fp16 mixed precision, 4 in fp32), the host updates the shard, and the
  // updated parameters come back over the link (storage precision: 2 or 4 bytes per parameter).
  // The host's Adam, per parameter of the shard (bytes to and from host memory):
  //   fp16 mixed precision: reads the fp16 gradient (2) and the fp32 master weight, momentum and
  //     variance (4 + 4 + 4); writes the three back (4 + 4 + 4) and the fp16 parameter copy that
  //     goes to the device (2): 2 + 12 + 12 + 2 = 28 bytes;
  //   fp32: reads the gradient, weight, momentum, variance (4 x 4); writes the weight, momentum
  //     and variance (3 x 4), the weight being what goes to the device: 16 + 12 = 28 bytes.
  // The DMA copies' own host-memory traffic is not added (it overlaps nothing else here).
  // Returns the last op (the copy back to the device).
  long offloaded_update(const std::string& group, double shard, const std::vector<long>& after) {
    const double host_adam_bytes_per_parameter = 28;
    const Precision grad = x_.storage;  // gradients are kept in the storage precision
    const long down = b_.host_copy(group + ".opt.grad_to_host", "grad_to_host", shard, grad, after);
    const long adam = b_.host_optimizer_update(group + ".opt.host_adam", "host_adam", shard,
                                               host_adam_bytes_per_parameter * shard, {down});
    return b_.host_copy(group + ".opt.param_to_device", "param_to_device", shard, x_.storage, {adam});
  }
  // grad_sync overlap (Megatron-Core's DistributedDataParallel with overlap_grad_reduce): the
  // dense gradients are reduced over "dp" in buckets of whole layers, in backward order; a
  // bucket's all-reduce (reduce-scatter under ZeRO >= 1) starts when the backward of its layers
  // for the last micro-batch is done, one bucket after another on the one communication stream,
  // while the backward of the layers below goes on. The optimizer waits for every bucket.
  // Bucket size: Megatron-Core's default, max(40 M, 1 M x data-parallel size) parameters
  // (DistributedDataParallelConfig.bucket_size).
  bool bucketed() const { return x_.overlap && plan_.gradient_replicas() > 1; }
  double bucket_limit() const { return std::max(40e6, 1e6 * plan_.gradient_replicas()); }
  void layer_gradients_ready(int layer) {
    layer_done_.emplace_back(layer, last_);
    if (!bucketed()) return;
    bucket_params_ += layer_dense_params(layer);
    bucketed_params_ += layer_dense_params(layer);
    bucket_ready_ = {last_};
    if (bucket_params_ >= bucket_limit()) flush_bucket();
  }
  // reduce_scatter_per_micro_batch: an earlier micro-batch's gradient of the layer joins the bucket
  // too (reduce-scattered into the shard it accumulates in); the last micro-batch's, above, also
  // counts the layer for the optimizer.
  void micro_batch_gradients_ready(int layer) {
    bucket_params_ += layer_dense_params(layer);
    bucket_ready_ = {last_};
    if (bucket_params_ >= bucket_limit()) flush_bucket();
  }
  double grad_reduce_bytes_per_parameter() const { return plan_.grad_reduce_in_fp32 ? 4.0 : x_.ea; }
  void flush_bucket() {
    if (bucket_params_ <= 0) return;
    const bool zero = plan_.zero_stage >= 1;
    std::vector<long> d = bucket_ready_;
    d.push_back(buckets_.empty() ? -1 : buckets_.back());
    buckets_.push_back(b_.collective(fmt::format("dense.grad.bucket{}.{}", buckets_.size(), zero ? "reduce_scatter" : "all_reduce"),
                                     zero ? "grad_reduce_scatter" : "grad_all_reduce", Phase::backward,
                                     zero ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce,
                                     CollectiveAlgorithm::ring, "dp", bucket_params_ * grad_reduce_bytes_per_parameter(), d));
    bucket_params_ = 0;
  }
  // ZeRO 1 and 2 (Megatron's distributed optimizer) under grad_sync overlap (overlap_param_gather):
  // the updated parameters are all-gathered during the next step's forward, each layer's before
  // its first micro-batch's forward, one after another from the step's start. A step being one
  // of many alike, this step's gathers stand for the previous update's.
  bool gathers_rotated() const { return bucketed() && (plan_.zero_stage == 1 || plan_.zero_stage == 2); }
  void prefetched_param_gather(int layer) {
    if (!gathers_rotated()) return;
    last_gather_ = b_.collective(fmt::format("L{}.param_all_gather", layer), "param_all_gather", Phase::optimizer,
                                 CollectiveKind::all_gather, CollectiveAlgorithm::ring, "dp",
                                 layer_dense_params(layer) * bytes_per_element(x_.storage), {last_gather_});
    joins_.push_back(last_gather_);
  }
  long tag(int micro_batch, int sender_vs, bool forward) const {
    return (static_cast<long>(micro_batch) * vt_ + sender_vs) * 2 + (forward ? 0 : 1);
  }
  std::string name(const std::string& what) const { return mb_ + what; }
  std::vector<long> all_done() {
    std::vector<long> v = sends_;
    v.insert(v.end(), background_.begin(), background_.end());
    for (long d : deps()) v.push_back(d);
    return v;
  }

  // Pipeline messages: under 1-D, Megatron's scatter/gather sends 1/t of the activations per
  // tensor rank (under sequence parallelism, the rank's sequence shard, which it keeps); under 2-D, 2.5-D and 3-D each rank sends its own shard to the rank with the
  // same tensor coordinates in the next stage.
  // DeepSpeed's engine as Megatron-DeepSpeed ran it (deepspeed/runtime/pipe/engine.py of 2021-22:
  // is_pipe_partitioned = is_model_parallel, is_grad_partitioned = False): the activations split over
  // the tensor ranks (PartitionedTensor, 1/t each, all-gathered by the receiver), the gradients sent
  // whole by every tensor rank, no gather.
  bool scattered(Phase ph) const {
    return x_.one_d() && (plan_.pipeline_engine == PipelineEngine::megatron || ph == Phase::forward);
  }
  double message_bytes(Phase ph) const { return x_.Tl() * x_.dl() * x_.ea / (scattered(ph) ? x_.t : 1); }
  // The all-gather of a scattered message's T x d over "tp" (sequence parallelism keeps the shard).
  void gather_message(Phase ph, bool scattered_message, const std::string& what, const std::string& label) {
    if (scattered_message && x_.t > 1 && !x_.sp())
      last_ = b_.collective(name(what), label, ph, CollectiveKind::all_gather, CollectiveAlgorithm::ring, "tp",
                            x_.T * x_.d * x_.ea, deps());
  }
  // DeepSpeed's blocking exchange (p2p.send / p2p.recv, NCCL's rendezvous): the data leaves once the
  // receiver has posted its receive (a zero-byte "ready" message back, tag kHandshakeTagBase + tag),
  // and both sides' next op waits for the transfer.
  void blocking_send(Phase ph, long tag, int offset) {
    last_ = b_.transfer(name("recv_ready"), "pp_recv_ready", ph, Dir::recv, "pp", -offset, 0, kHandshakeTagBase + tag,
                        deps());
    last_ = b_.transfer(name(ph == Phase::forward ? "send_activations" : "send_gradients"),
                        ph == Phase::forward ? "pp_send_activations" : "pp_send_gradients", ph, Dir::send, "pp", offset,
                        message_bytes(ph), tag, deps());
  }
  // A backward's receive first restores the stage's own output, whose partition alone was kept
  // after it was sent (_exec_recv_grads: PartitionedTensor.full(), an all-gather over "tp").
  void blocking_receive(Phase ph, long tag, int offset) {
    if (ph == Phase::backward) gather_message(ph, scattered(Phase::forward), "pp_restore_output", "pp_restore_output");
    last_ = b_.transfer(name("send_ready"), "pp_send_ready", ph, Dir::send, "pp", -offset, 0, kHandshakeTagBase + tag,
                        deps());
    last_ = b_.transfer(name(ph == Phase::forward ? "recv_activations" : "recv_gradients"),
                        ph == Phase::forward ? "pp_recv_activations" : "pp_recv_gradients", ph, Dir::recv, "pp", offset,
                        message_bytes(ph), tag, deps());
    gather_message(ph, scattered(ph), "pp_all_gather", "pp_all_gather");
  }
  void send(Phase ph, long tag, int offset) {
    const double bytes = message_bytes(ph);
    sends_.push_back(b_.transfer(name(ph == Phase::forward ? "send_activations" : "send_gradients"),
                                 ph == Phase::forward ? "pp_send_activations" : "pp_send_gradients", ph, Dir::send, "pp",
                                 offset, bytes, tag, deps()));
  }
  void receive(Phase ph, long tag, int offset) {
    const double bytes = message_bytes(ph);
    last_ = b_.transfer(name(ph == Phase::forward ? "recv_activations" : "recv_gradients"),
                        ph == Phase::forward ? "pp_recv_activations" : "pp_recv_gradients", ph, Dir::recv, "pp", offset,
                        bytes, tag, deps());
    gather_message(ph, scattered(ph), "pp_all_gather", "pp_all_gather");
  }
  // 1-D: an all-reduce of the T x d activations over "tp" after the device's last op.
  long tp_all_reduce(const std::string& what, Phase ph) {
    const std::vector<long> d = deps();
    if (x_.t <= 1 && d.size() == 1) return d[0];
    return b_.collective(name(what), what, ph, CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "tp",
                         x_.t <= 1 ? 0 : x_.T * x_.d * x_.ea, d);
  }
  // The dependencies of the device's next op: its last op and a pending join.
  std::vector<long> deps() {
    std::vector<long> d{last_};
    d.insert(d.end(), joins_.begin(), joins_.end());
    joins_.clear();
    return d;
  }
  // ZeRO 3: a layer's parameters are all-gathered before its forward and its backward. With
  // prefetch_parameters the gather is off the device's chain: it waits for the previous gather
  // (one communication stream) and for the start of the layer before this one (one layer
  // ahead, DeepSpeed's prefetch), and the layer's first op waits for it; so it overlaps the
  // previous layer's compute when that is long enough.
  void zero3_gather(int layer, Phase ph) {
    if (plan_.zero_stage < 3 || plan_.gradient_replicas() <= 1) return;
    const double params = (12 * x_.d * x_.d + 13 * x_.d) * x_.pf;
    const std::string n = name(fmt::format("L{}.{}.zero3_param_all_gather", layer, ph == Phase::forward ? "fwd" : "bwd"));
    const double bytes = params * bytes_per_element(x_.storage);
    if (!plan_.prefetch_parameters) {
      last_ = b_.collective(n, "zero3_param_all_gather", ph, CollectiveKind::all_gather, CollectiveAlgorithm::ring, "dp",
                            bytes, deps());
      return;
    }
    const long gather = b_.collective(n, "zero3_param_all_gather", ph, CollectiveKind::all_gather, CollectiveAlgorithm::ring,
                                      "dp", bytes, {last_zero3_gather_, previous_layer_start_});
    previous_layer_start_ = last_;
    last_zero3_gather_ = gather;
    joins_.push_back(gather);
  }

  // The token embedding: a gather of each token's row (forward) and a scatter-add of the output
  // gradient into the table (backward), or google-research/bert's lookup on a TPU (one_hot_matmul,
  // models/moe_spec.hpp): forward one-hot[T x V] times the table[V x d], backward the table's
  // gradient one-hot^T[V x T] times dOut[T x d] (no data gradient: the one-hot has none). Both
  // GEMMs move rows rather than compute the model: executed FLOPs, not model FLOPs.
  void embedding(Phase ph) {
    if (x_.V <= 0) return;
    const double Tl = x_.Ts(), dl = x_.dl();
    const bool F = ph == Phase::forward;
    if (x_.model.embedding_lookup == ModelSpec::EmbeddingLookup::one_hot_matmul) {
      last_ = F ? b_.routing_gemm(name("embedding"), "embedding", ph, x_.gemm, x_.storage,
                                  per_core(gemm_shape(Tl, dl, x_.V), x_.cores, 0), deps())
                : b_.routing_gemm(name("embedding.wgrad"), "embedding.wgrad", ph, x_.gemm, x_.storage,
                                  per_core(gemm_shape(x_.V, dl, Tl), x_.cores, 2), deps());
      return;
    }
    last_ = b_.memory(name(F ? "embedding" : "embedding.bwd"), F ? "embedding" : "embedding.bwd", ph,
                      Kernel::token_permute, x_.storage, rows_cols(Tl, dl), 0, (F ? 2 : 3) * Tl * dl * x_.ea, deps());
  }
  // BERT's heads (encoder-only): the masked-LM transform (a d x d GEMM, GELU, layer norm) on the
  // masked tokens, then their logits over the vocabulary (the tied embedding); the next-sentence
  // pooler (d x d on each sequence's first token) and its 2-way classifier. `F`: forward.
  void pretraining_heads(bool F) {
    const Phase ph = F ? Phase::forward : Phase::backward;
    const double Tm = x_.masked_tokens(), d = x_.d;
    const std::string sfx = F ? "" : ".bwd";
    auto dense = [&](const std::string& what, KernelShape g) {
      last_ = F ? b_.gemm(name(what), what, ph, x_.gemm, x_.storage, g, deps())
                : b_.gemm_backward(name(what), what, x_.gemm, x_.storage, g, deps());
    };
    if (x_.model.next_sentence) {
      dense("nsp_pooler", gemm_shape(x_.b, d, d));
      dense("nsp_classifier", gemm_shape(x_.b, 2, d));
    }
    dense("mlm_transform", per_core(gemm_shape(Tm, d, d), x_.cores, 0));
    special_function(name("mlm_gelu" + sfx), "mlm_gelu" + sfx, ph,
                     {Kernel::gelu, x_.storage, x_.storage, elements(Tm * d), 8 * Tm * d, Tm, d, F ? 1 : 2, 1, F ? 0 : 1});
    special_function(name("mlm_layernorm" + sfx), "mlm_layernorm" + sfx, ph,
                     {Kernel::layer_norm, x_.elementwise, x_.storage, rows_cols(Tm, d), 8 * Tm * d, Tm, d, F ? 1 : 2, 1, F ? 0 : 1});
  }
  void head_forward() {
    const double Tl = x_.Tl(), dl = x_.dl(), Vl = x_.V / x_.hs, Ts = x_.Ts();
    if (x_.V <= 0) return;
    const Phase F = Phase::forward;
    if (x_.encoder_only()) {  // post-LN (BERT): no final layer norm; the logits of the masked tokens
      pretraining_heads(true);
      linear_forward(name(""), "logits", "", F, logits_);
      const double Tm = x_.masked_tokens();
      special_function(name("cross_entropy"), "cross_entropy", F,
                       {Kernel::softmax, x_.elementwise, x_.storage, rows_cols(Tm, Vl), 5 * Tm * Vl, Tm, Vl, 1, 1});
      return;
    }
    special_function(name("final_layernorm"), "final_layernorm", F,
                     {Kernel::layer_norm, x_.elementwise, x_.storage, rows_cols(Ts, dl), 8 * Ts * dl, Ts, dl, 1, 1});
    linear_forward(name(""), "logits", "", F, logits_);
    special_function(name("cross_entropy"), "cross_entropy", F,
                     {Kernel::softmax, x_.elementwise, x_.storage, rows_cols(Tl, Vl), 5 * Tl * Vl, Tl, Vl, 1, 1});
  }
  void head_backward() {
    const double Tl = x_.Tl(), dl = x_.dl(), Vl = x_.V / x_.hs, Ts = x_.Ts();
    if (x_.V <= 0) return;
    const Phase B = Phase::backward;
    if (x_.encoder_only()) {
      const double Tm = x_.masked_tokens();
      special_function(name("cross_entropy.bwd"), "cross_entropy.bwd", B,
                       {Kernel::softmax, x_.elementwise, x_.storage, rows_cols(Tm, Vl), 5 * Tm * Vl, Tm, Vl, 2, 1, 1});
      linear_backward(name(""), "logits", logits_);
      pretraining_heads(false);
      return;
    }
    special_function(name("cross_entropy.bwd"), "cross_entropy.bwd", B,
                     {Kernel::softmax, x_.elementwise, x_.storage, rows_cols(Tl, Vl), 5 * Tl * Vl, Tl, Vl, 2, 1, 1});
    if (x_.one_d() && !x_.sp()) {
      last_ = b_.gemm_backward(name("logits"), "logits", x_.pp.embed_gemm, x_.storage, logits_.forward_gemm, deps());
      last_ = tp_all_reduce("logits_grad_all_reduce", B);
    } else {
      linear_backward(name(""), "logits", logits_);
    }
    special_function(name("final_layernorm.bwd"), "final_layernorm.bwd", B,
                     {Kernel::layer_norm, x_.elementwise, x_.storage, rows_cols(Ts, dl), 8 * Ts * dl, Ts, dl, 2, 1, 1});
  }

  // A tensor-parallel collective of a linear (models/tensor_parallel.hpp). Under 1-D it keeps
  // the label the all-reduces have always had ("tp_all_reduce", "tp_all_reduce.bwd").
  long tp_collective(const std::string& p, const std::string& label, const TensorCollective& c,
                     const std::string& sfx, Phase ph, const std::vector<long>& after) {
    const std::string what = x_.one_d() && !x_.sp() ? "tp_all_reduce" : "tp_" + c.what;
    const std::string lsfx = ph == Phase::backward && sfx.empty() ? ".bwd" : sfx;
    return b_.collective(p + label + "." + c.what + lsfx, what + lsfx, ph, c.kind, CollectiveAlgorithm::ring, c.role,
                         c.bytes, after);
  }
  // The GEMM and storage precisions of a linear: the FFN's, or the attention's (and the head's).
  // Under fp8 the layers' linears compute in fp8 (their stored activations stay 16-bit).
  // The logits (the embedding's GEMM) compute in the row's embed_gemm (fp32 under layerwise).
  std::pair<Precision, Precision> linear_precision(const TensorLinear& lin, const std::string& label) const {
    if (label == "ffn1" || label == "ffn2") return {fp8_linear(lin) ? Precision::fp8 : x_.ffn_gemm, x_.ffn_storage};
    if (&lin == &logits_) return {fp8_linear(lin) ? Precision::fp8 : x_.pp.embed_gemm, x_.storage};
    return {fp8_linear(lin) ? Precision::fp8 : x_.gemm, x_.storage};
  }
  // The precision a GEMM's operands are read in: its own when autocast made half copies of them.
  // (Where the matrix unit rounds them as it reads them, its operands are read as kept.)
  Precision operands(Precision gemm, Precision kept) const {
    return narrower(gemm, kept) && !x_.pp.operand_rounding_in_gemm ? gemm : kept;
  }
  // A linear's parameters: the FFN's (the experts' in an MoE layer) or the shared ones.
  Precision linear_param(const std::string& label) const {
    return label == "ffn1" || label == "ffn2" ? x_.pp.expert_param : x_.pp.shared_param;
  }
  // Autocast (torch.autocast, APEX O1; the attention under BaGuaLu's layer-wise mode): a GEMM that
  // computes in a narrower precision than an operand is kept in reads a copy made by a cast
  // kernel, memory-bound (read the wide value, write the narrow one: 6 bytes per element for fp32
  // to half), and its narrow result is cast back for the wide ops after it. Forward: the weight
  // (k x n, once per forward pass: autocast caches the cast copy for the pass, and full
  // recomputation reruns it), the input (m x k) and the output (m x n). Backward: the output
  // gradient (m x n) to half, the half data gradient (m x k) and weight gradient (k x n, into the
  // fp32 .grad) back. fp8 has its own casts (fp8_cast).
  static bool narrower(Precision gemm, Precision kept) {
    return gemm != Precision::fp8 && bytes_per_element(kept) > bytes_per_element(gemm);
  }
  // (n, then what: the op's name less ".autocast"; joined only for a cast that happens, since most
  // GEMMs cast nothing and the names were a sweep's largest allocation.)
  void autocast(const std::string& n, const char* what, const char* label, Phase ph, Precision gemm, Precision kept,
                double rows, double cols) {
    if (!narrower(gemm, kept) || rows * cols <= 0 || x_.pp.operand_rounding_in_gemm) return;
    last_ = b_.memory(n + what + ".autocast", label, ph, Kernel::token_permute, Precision::fp32, rows_cols(rows, cols), 0,
                      rows * cols * (bytes_per_element(kept) + bytes_per_element(gemm)), deps());
  }
  // A reduction or special function: `kernel` on tensors of rows x cols elements stored in
  // `stored`, `reads` of them read and `writes` written, computing in `p` where it is not widened.
  // `saved`: of the reads, the tensors autograd saved from the forward (a backward's), which are
  // the forward's wide copies where the op is widened (PyTorch saves the op's own input or output:
  // GELU's and layer norm's input, softmax's output), so only the incoming gradients are cast up.
  struct SpecialOp {
    Kernel kernel;
    Precision p, stored;
    KernelShape shape;
    double flops, rows, cols;
    int reads, writes, saved = 0;
  };
  // Under a mode whose reductions and special functions compute wider than their tensors are stored
  // (PrecisionPlan::special: layerwise's fp64, BaGuaLu's), each input is first cast into a wide copy
  // (read narrow, write wide), the kernel computes in the wide precision on wide tensors (its flops
  // at the device's peak in that precision, its bytes at that width) and each output is cast back
  // (read wide, write narrow): the casts a PyTorch port writes around the op (x.double(), the op,
  // .to(dtype)); in the backward, their ToCopyBackward casts the incoming gradient up and the
  // op's gradient down, and the op's saved tensors are already wide. An assumption: APEX casts nothing to fp64 (O2 patches no function, O1 only to fp32),
  // so fp64 is BaGuaLu's own rule, and the paper does not say whether a fused CPE kernel that reads
  // the narrow tensor and computes in fp64 registers (narrow bytes, no casts) does it instead.
  // Otherwise the kernel at `p` on the stored bytes.
  void special_function(const std::string& n, const std::string& label, Phase ph, const SpecialOp& op) {
    const double narrow = bytes_per_element(op.stored), wide = bytes_per_element(x_.pp.special);
    if (!(wide > narrow)) {
      last_ = b_.memory(n, label, ph, op.kernel, op.p, op.shape, op.flops,
                        double(op.reads + op.writes) * op.rows * op.cols * narrow, deps());
      return;
    }
    const std::string cast = "special_cast" + label.substr(std::min(label.find('.'), label.size()));
    const double cast_bytes = op.rows * op.cols * (narrow + wide);
    last_ = b_.memory(n + ".widen", cast, ph, Kernel::token_permute, Precision::fp32, rows_cols(op.rows, op.cols), 0,
                      (op.reads - op.saved) * cast_bytes, deps());
    last_ = b_.memory(n, label, ph, op.kernel, x_.pp.special, op.shape, op.flops,
                      double(op.reads + op.writes) * op.rows * op.cols * wide, deps());
    last_ = b_.memory(n + ".narrow", cast, ph, Kernel::token_permute, Precision::fp32, rows_cols(op.rows, op.cols), 0,
                      op.writes * cast_bytes, deps());
  }
  // The forward casts around a GEMM of m x n x k (`batch` products, `param` the weight's
  // precision): weight and input before it (`before`), the output after it.
  void autocast_forward(const std::string& n, Phase ph, Precision gemm, Precision storage, Precision param, double m,
                        double nn, double k, double batch, bool before) {
    if (before) {
      autocast(n, ".weight", "autocast_weight", ph, gemm, param, k * batch, nn);
      autocast(n, ".input", "autocast_activation", ph, gemm, storage, m * batch, k);
    } else {
      autocast(n, ".output", "autocast_activation", ph, gemm, storage, m * batch, nn);
    }
  }
  // The backward casts: the output gradient before the two GEMMs, the data and weight gradients
  // after them.
  void autocast_backward(const std::string& n, Precision gemm, Precision storage, Precision param, double m, double nn,
                         double k, double batch, bool before) {
    const Phase B = Phase::backward;
    if (before) {
      autocast(n, ".grad_output", "autocast_activation.bwd", B, gemm, storage, m * batch, nn);
    } else {
      autocast(n, ".grad_input", "autocast_activation.bwd", B, gemm, storage, m * batch, k);
      autocast(n, ".grad_weight", "autocast_weight.bwd", B, gemm, param, k * batch, nn);
    }
  }
  // A linear's forward: its gathers, the local GEMM, its reductions, in a chain.
  void linear_forward(const std::string& p, const std::string& label, const std::string& sfx, Phase ph,
                      const TensorLinear& lin) {
    if (tp_overlap(label)) return overlapped_linear_forward(p, label, sfx, ph, lin);
    for (const TensorCollective& c : lin.forward_before) last_ = tp_collective(p, label, c, sfx, ph, deps());
    const auto [m, n, k] = lin.forward_gemm.dims;
    const double batch = lin.forward_gemm.batch;
    if (fp8_linear(lin)) {
      if (sfx.empty() && mb_.rfind("mb0.", 0) == 0) fp8_cast(p + label + ".weight", "fp8_cast_weight", ph, k * batch, n);
      fp8_cast(p + label + ".input", "fp8_cast_transpose" + sfx, ph, m * batch, k);
    }
    const auto [gp, st] = linear_precision(lin, label);
    autocast_forward(p + label, ph, gp, st, linear_param(label), m, n, k, batch, true);
    last_ = b_.gemm(p + label, label + sfx, ph, gp, operands(gp, st), per_core(lin.forward_gemm, x_.cores, 0), deps());
    autocast_forward(p + label, ph, gp, st, linear_param(label), m, n, k, batch, false);
    for (const TensorCollective& c : lin.forward_after) last_ = tp_collective(p, label, c, sfx, ph, deps());
  }
  // A linear's backward: the data gradient (after its gathers), then the weight gradient (after
  // its gathers); the reductions of dX and dA overlap what follows them, and the next op waits
  // for them.
  void linear_backward(const std::string& p, const std::string& label, const TensorLinear& lin) {
    const Phase B = Phase::backward;
    const auto [m, n, k] = lin.forward_gemm.dims;
    const double batch = lin.forward_gemm.batch;
    const bool ub = tp_overlap(label);
    if (!ub)
      for (const TensorCollective& c : lin.dgrad_before) last_ = tp_collective(p, label, c, "", B, deps());
    if (fp8_linear(lin)) fp8_cast(p + label + ".grad_output", "fp8_cast_transpose.bwd", B, m * batch, n);
    const auto [gp, st] = linear_precision(lin, label);
    autocast_backward(p + label, gp, st, linear_param(label), m, n, k, batch, true);
    const std::vector<long> before = deps();
    std::vector<long> wgrad_deps;  // (started with the data gradient, not after it)
    for (const TensorCollective& c : lin.wgrad_alongside_dgrad)
      wgrad_deps.push_back(tp_collective(p, label, c, "", B, before));
    const long dgrad = ub ? overlapped_dgrad(p + label + ".dgrad", label + ".dgrad", gp, operands(gp, st), lin, before)
                          : b_.gemm(p + label + ".dgrad", label + ".dgrad", B, gp, operands(gp, st),
                                    per_core(gemm_shape(m, k, n, batch), x_.cores, 0), before);
    last_ = dgrad;
    for (const TensorCollective& c : lin.wgrad_before) last_ = tp_collective(p, label, c, "", B, {last_});
    wgrad_deps.push_back(last_);
    const long wgrad = b_.gemm(p + label + ".wgrad", label + ".wgrad", B, gp, operands(gp, st),
                               per_core(gemm_shape(k, n, m, batch), x_.cores, 2), wgrad_deps);
    // "bulk" qkv_wgrad / fc1_wgrad: the reduce-scatter of dX runs beside the weight gradient.
    if (ub && !lin.dgrad_after.empty()) b_.set_communication_sms(wgrad, ParallelPlan::kTpOverlapCommunicationSms);
    std::vector<long> pending;  // (added after the weight gradient, as Megatron's 1-D graphs always were)
    for (const TensorCollective& c : lin.dgrad_after) pending.push_back(tp_collective(p, label, c, "", B, {dgrad}));
    for (const TensorCollective& c : lin.wgrad_after) pending.push_back(tp_collective(p, label, c, "", B, {wgrad}));
    last_ = wgrad;
    autocast_backward(p + label, gp, st, linear_param(label), m, n, k, batch, false);
    joins_.insert(joins_.end(), pending.begin(), pending.end());
  }

  // Tensor-parallel communication overlap (plan.tp_comm_overlap: Megatron's --tp-comm-overlap, which
  // hands the layer linears' sequence-parallel collectives to Transformer Engine's userbuffers with
  // initialize_ub's default methods, transformer_engine/pytorch/module/base.py, and
  // common/comm_gemm_overlap/comm_gemm_overlap.cpp):
  //  - "ring_exchange" (qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad): the all-gather before a GEMM
  //    becomes t - 1 hops around the "tp" ring, one row chunk each (split_overlap_ag): step i
  //    multiplies chunk i while sending it on and receiving chunk i + 1; the hops use the copy
  //    engines and the GEMM keeps every SM. Only the first chunk's GEMM waits for nothing.
  //  - "pipeline" (proj_fprop, fc2_fprop): the GEMM in 4 row chunks, each chunk's reduce-scatter
  //    launched as it finishes and run while the next computes (split_overlap_rs); the last one is
  //    exposed. The chunks compute on the SMs the reduce-scatter kernels leave (16 of them).
  //  - "bulk" (qkv_dgrad, fc1_dgrad; qkv_wgrad, fc1_wgrad): the all-gather of X beside the data
  //    gradient and the reduce-scatter of dX beside the weight gradient, as without the overlap,
  //    but the GEMMs compute on the SMs the userbuffers kernels leave (bulk_overlap).
  // The logits' linear is Megatron's own, not Transformer Engine's: it keeps NCCL's collectives.
  bool tp_overlap(const std::string& label) const {
    return plan_.tp_comm_overlap && x_.sp() && (label == "attn_qkv" || label == "attn_proj" || label == "ffn1" || label == "ffn2");
  }
  // A GEMM whose rows (the tokens) arrive in t chunks around the "tp" ring (`chunk_bytes` each).
  long ring_exchange_gemm(const std::string& n, const std::string& label, Phase ph, Precision gp, Precision st,
                          const KernelShape& whole, double chunk_bytes, const std::vector<long>& start) {
    const int t = static_cast<int>(x_.t);
    const KernelShape chunk = gemm_shape(double(whole.dims[0] / t), whole.dims[1], whole.dims[2], whole.batch);
    long compute = -1, arrived = -1;
    for (int i = 0; i < t; ++i) {
      const long here = arrived;  // chunk i (i > 0: received during step i - 1)
      if (i + 1 < t) arrived = ring_hop(n + ".", "exchange", ph, i, chunk_bytes, i == 0 ? start : std::vector<long>{here}, "tp");
      compute = b_.gemm(fmt::format("{}.chunk{}", n, i), label, ph, gp, st, per_core(chunk, x_.cores, 0),
                        i == 0 ? start : std::vector<long>{compute, here});
    }
    return compute;
  }
  // A GEMM whose output rows are reduce-scattered over "tp" chunk by chunk (`rs`: the whole output's).
  // `sfx`: "" or ".recompute" (the forward's), appended to the labels.
  long pipelined_gemm_reduce_scatter(const std::string& n, const std::string& label, const std::string& sfx, Phase ph,
                                     Precision gp, Precision st, const KernelShape& whole, const TensorCollective& rs) {
    int splits = ParallelPlan::kTpOverlapPipelineSplits;
    while (splits > 1 && whole.dims[0] % splits != 0) splits /= 2;
    const KernelShape chunk = gemm_shape(double(whole.dims[0] / splits), whole.dims[1], whole.dims[2], whole.batch);
    const std::vector<long> start = deps();
    long compute = -1, comm = -1;
    for (int j = 0; j < splits; ++j) {
      compute = b_.gemm(fmt::format("{}.chunk{}", n, j), label + sfx, ph, gp, st, per_core(chunk, x_.cores, 0),
                        j == 0 ? start : std::vector<long>{compute});
      b_.set_communication_sms(compute, ParallelPlan::kTpOverlapCommunicationSms);
      comm = b_.collective(fmt::format("{}.{}{}", n, rs.what, j), "tp_" + rs.what + sfx, ph, rs.kind,
                           CollectiveAlgorithm::ring, rs.role, rs.bytes / splits,
                           j == 0 ? std::vector<long>{compute} : std::vector<long>{compute, comm});
    }
    return comm;
  }
  void overlapped_linear_forward(const std::string& p, const std::string& label, const std::string& sfx, Phase ph,
                                 const TensorLinear& lin) {
    const auto [m, n, k] = lin.forward_gemm.dims;
    if (fp8_linear(lin)) {
      if (sfx.empty() && mb_.rfind("mb0.", 0) == 0) fp8_cast(p + label + ".weight", "fp8_cast_weight", ph, k * lin.forward_gemm.batch, n);
      fp8_cast(p + label + ".input", "fp8_cast_transpose" + sfx, ph, m * lin.forward_gemm.batch, k);
    }
    const auto [gp, st] = linear_precision(lin, label);
    if (!lin.forward_before.empty())  // column-parallel: its input's all-gather, ring-exchanged
      last_ = ring_exchange_gemm(p + label, label + sfx, ph, gp, st, lin.forward_gemm,
                                 lin.forward_before.front().bytes / x_.t, deps());
    else  // row-parallel: its output's reduce-scatter, pipelined
      last_ = pipelined_gemm_reduce_scatter(p + label, label, sfx, ph, gp, st, lin.forward_gemm,
                                            lin.forward_after.front());
  }
  // The data gradient under the overlap: a row-parallel linear's dY all-gather ring-exchanged with
  // it; a column-parallel one's, with X's all-gather beside it ("bulk"), on the SMs that leaves.
  long overlapped_dgrad(const std::string& n, const std::string& label, Precision gp, Precision st,
                        const TensorLinear& lin, const std::vector<long>& before) {
    const auto [m, nn, k] = lin.forward_gemm.dims;
    const KernelShape shape = gemm_shape(m, k, nn, lin.forward_gemm.batch);
    if (!lin.dgrad_before.empty())
      return ring_exchange_gemm(n, label, Phase::backward, gp, st, shape, lin.dgrad_before.front().bytes / x_.t, before);
    const long dgrad = b_.gemm(n, label, Phase::backward, gp, st, per_core(shape, x_.cores, 0), before);
    if (!lin.wgrad_alongside_dgrad.empty()) b_.set_communication_sms(dgrad, ParallelPlan::kTpOverlapCommunicationSms);
    return dgrad;
  }

  // fp8 (Transformer Engine's Linear under fp8_autocast, delayed scaling): the GEMM reads fp8
  // copies of its operands, made by memory-bound kernels: the input X (m x k) is cast and
  // transposed in one pass (read 2 bytes, write the fp8 copy and its transpose, 1 + 1, and its
  // amax: 1 flop per element), the weight likewise once per step (its fp8 copies are kept
  // across the micro-batches, TE's is_first_microbatch), the output gradient dY (m x n) before
  // the backward's two GEMMs. The logits' linear stays 16-bit (Megatron keeps the output layer
  // out of fp8). The scaling factors' amax reduction is amax_reduction() below.
  bool fp8_linear(const TensorLinear& lin) const { return x_.fp8 && &lin != &logits_; }
  void fp8_cast(const std::string& n, const std::string& label, Phase ph, double rows, double cols) {
    const double elements = rows * cols;
    last_ = b_.memory(n + ".fp8_cast", label, ph, Kernel::token_permute, x_.storage, rows_cols(rows, cols), elements,
                      4 * elements, deps());
  }
  // After each forward chunk, TE all-reduces the amax history of the chunk's fp8 tensors (fp32:
  // input, weight and output gradient of each of a layer's 4 linears) over the data-parallel
  // replicas (Megatron's amax reduction group also spans the tensor group: its extra hops are
  // not modelled), before the next op.
  void amax_reduction(int layers) {
    if (!x_.fp8 || plan_.gradient_replicas() <= 1) return;
    last_ = b_.collective(name("fp8_amax_all_reduce"), "fp8_amax_all_reduce", Phase::forward, CollectiveKind::all_reduce,
                          CollectiveAlgorithm::ring, "dp", 4.0 * 3 * 4 * layers, deps());
  }

  // The attention core's local shapes: b / tok sequences, h / hs heads.
  double local_heads() const { return x_.b / x_.tok * x_.h / x_.hs; }  // (sequence, head) pairs
  KernelShape scores() const { return gemm_shape(x_.s, x_.s, x_.d / x_.h, local_heads()); }
  KernelShape context() const { return gemm_shape(x_.s, x_.d / x_.h, x_.s, local_heads()); }

  // A layer's self-attention is causal in a decoder (GPT; an encoder-decoder's decoder layers: a
  // token attends to the tokens before it), not in an encoder (BERT; the encoder layers); the
  // cross-attention over the encoder's output never is. Only FlashAttention's kernel skips the masked
  // blocks (flash_attention_causal); standard attention computes every score and masks them.
  bool causal_self_attention(int l) const {
    return x_.model.architecture == ModelSpec::Architecture::decoder || x_.model.is_decoder_layer(l);
  }
  bool causal_ = false;  // the layer being built's (layer_forward, layer_backward)
  bool causal(const std::string& a) const { return a == "attn" && causal_; }
  // A self-attention core (forward or backward, built by `core`) whose model FLOPs, the whole s x s
  // GEMMs, are half hidden by the causal mask: that half counted as masked (GraphBuilder::
  // count_masked_attention), for the MFU count that leaves it out.
  template <class Core>
  void self_attention(Core&& core) {
    const double before = b_.model_flops();
    core();
    if (causal_) b_.count_masked_attention((b_.model_flops() - before) / 2);
  }

  // The precision the attention's scores and probabilities are stored in (es bytes).
  Precision score_storage() const { return x_.es == x_.ea ? x_.storage : Precision::fp32; }

  // The attention core: what selective recomputation reruns. Grouped-query attention shares each
  // key/value head among h / kv query heads: the per-query-head GEMMs are unchanged.
  // `a`: "attn" (self-attention) or "cross" (a decoder layer's attention over the encoder's output).
  void attention_core(const std::string& p, Phase ph, const std::string& suffix, const std::string& a = "attn") {
    if (x_.cp > 1 && x_.cp_all_gather) {
      all_gather_attention(p, ph, suffix, 2);
      return;
    }
    if (x_.cp > 1) {
      ring_attention_forward(p, ph, suffix);
      return;
    }
    if (x_.flash) {
      last_ = b_.fused_attention(p + a + "_flash" + suffix, a + "_flash" + suffix, ph, x_.gemm, x_.s, x_.dh(), 2,
                                 local_heads(), deps(), causal(a));
      return;
    }
    const double s = x_.s, rows = local_heads() * s;  // = T_local x heads_local
    last_ = b_.gemm(p + a + "_scores" + suffix, a + "_scores" + suffix, ph, x_.gemm, x_.storage, scores(), deps());
    special_function(p + a + "_softmax" + suffix, a + "_softmax" + suffix, ph,
                     {Kernel::softmax, x_.score_elementwise, score_storage(), rows_cols(rows, s), 5 * rows * s, rows, s, 1, 1});
    if (x_.dropout > 0) attention_dropout(p, ph, suffix, a);
    last_ = b_.gemm(p + a + "_context" + suffix, a + "_context" + suffix, ph, x_.gemm, x_.storage, context(), deps());
  }
  void attention_core_backward(const std::string& p, const std::string& a) {
    const Phase B = Phase::backward;
    const double s = x_.s, rows = local_heads() * s;
    if (x_.flash) {  // FlashAttention-2's backward: recomputes the scores blockwise, 5 GEMMs
      last_ = b_.fused_attention(p + a + "_flash", a + "_flash.bwd", B, x_.gemm, s, x_.dh(), 5, local_heads(), deps(),
                                 causal(a));
      return;
    }
    last_ = b_.gemm_backward(p + a + "_context", a + "_context", x_.gemm, x_.storage, context(), deps());
    if (x_.dropout > 0) attention_dropout(p, B, ".bwd", a);
    special_function(p + a + "_softmax", a + "_softmax.bwd", B,
                     {Kernel::softmax, x_.score_elementwise, score_storage(), rows_cols(rows, s), 5 * rows * s, rows, s, 2, 1, 1});
    last_ = b_.gemm_backward(p + a + "_scores", a + "_scores", x_.gemm, x_.storage, scores(), deps());
  }
  // A decoder layer's cross-attention (T5, GShard): layer norm; Q from the decoder's tokens, K and
  // V from the encoder's output (after its final layer norm); the attention core over the
  // encoder's s positions; the output projection; the residual.
  void cross_attention_forward(const std::string& p, Phase ph, const std::string& sfx) {
    const double Ts = x_.Ts(), dl = x_.dl();
    special_function(p + "cross_layernorm", "cross_layernorm" + sfx, ph,
                     {Kernel::layer_norm, x_.elementwise, x_.storage, rows_cols(Ts, dl), 8 * Ts * dl, Ts, dl, 1, 1});
    linear_forward(p, "cross_q", sfx, ph, cross_q_);
    linear_forward(p, "cross_kv", sfx, ph, cross_kv_);
    attention_core(p, ph, sfx, "cross");
    linear_forward(p, "cross_proj", sfx, ph, proj_);
    last_ = b_.memory(p + "cross_residual", "cross_residual" + sfx, ph, Kernel::residual_add, x_.elementwise,
                      elements(Ts * dl), 3 * Ts * dl, 3 * Ts * dl * x_.ea, deps(), hidden_dropout_words(Ts * dl));
  }
  void cross_attention_backward(const std::string& p) {
    const double Ts = x_.Ts(), dl = x_.dl();
    const Phase B = Phase::backward;
    last_ = b_.memory(p + "cross_residual", "cross_residual.bwd", B, Kernel::residual_add, x_.elementwise,
                      elements(Ts * dl), 3 * Ts * dl, 6 * Ts * dl * x_.ea, deps());
    linear_backward(p, "cross_proj", proj_);
    attention_core_backward(p, "cross");
    linear_backward(p, "cross_kv", cross_kv_);
    linear_backward(p, "cross_q", cross_q_);
    special_function(p + "cross_layernorm", "cross_layernorm.bwd", B,
                     {Kernel::layer_norm, x_.elementwise, x_.storage, rows_cols(Ts, dl), 8 * Ts * dl, Ts, dl, 2, 1, 1});
  }

  // Ring attention (context parallelism; Transformer Engine's AttnFuncWithCPAndKVP2P, which
  // Megatron-Core runs): this device's s/c query rows (its 2 of the 2c chunks) meet the c key/
  // value blocks of the sequence one per step, each step one fused attention kernel on an
  // (s/c) x (s/c) block. Block 0 is the device's own; step i's key/value block arrives from the
  // ring's previous device while step i-1's block is computed (send +1, receive from -1 on "cp"),
  // so the exchange hides when a block's kernel is longer than its transfer. The causal mask:
  // the 2c-chunk layout gives every device the same share of the unmasked pairs (ring_block_attention).
  double ring_block() const { return x_.s / x_.cp; }
  // One block's keys and values: 2 x (b/tok sequences x s/c tokens x local kv heads x head dim).
  double ring_kv_bytes() const { return 2 * x_.b / x_.tok * ring_block() * (x_.kv / x_.hs) * x_.dh() * x_.ea; }
  // One hop of the ring over `role` ("cp", "tp"): send to the next device, receive from the previous
  // one (p: the op's prefix).
  long ring_hop(const std::string& p, const std::string& what, Phase ph, int step, double bytes,
                const std::vector<long>& after, const std::string& role = "cp") {
    const long tag = kRingTagBase + ring_tags_++;
    const std::string n = fmt::format("{}{}_{}{}", p, role, what, step);
    b_.transfer(n + ".send", role + "_send_" + what, ph, Dir::send, role, +1, bytes, tag, after);
    return b_.transfer(n + ".recv", role + "_recv_" + what, ph, Dir::recv, role, +1, bytes, tag, after);
  }
  // Step i's kernel of ring attention. Under a causal mask (Transformer Engine's
  // AttnFuncWithCPAndKVP2P): step 0 is the device's own block, a causal kernel; on a later step
  // either the whole query block meets the first half of the arriving key/value block or the
  // second half of the queries meets the whole key/value block: half the block's (query, key)
  // pairs, unmasked, costed as the full-mask kernel on twice the pairs of half the length (the same
  // FLOPs). Without the mask every step is the whole block. Model FLOPs count every block whole,
  // as the plain kernel's s^2 shared by c devices.
  long ring_block_attention(const std::string& n, const std::string& label, Phase ph, int step, int passes,
                            const std::vector<long>& after) {
    const double whole = nominal_work(Kernel::flash_attention,
                                      KernelShape{{std::int64_t(ring_block()), std::int64_t(x_.dh()),
                                                   model_attention_passes(passes)},
                                                  std::int64_t(local_heads())},
                                      x_.gemm)
                             .flops;
    if (causal_ && step > 0)
      return b_.fused_attention(n, label, ph, x_.gemm, ring_block() / 2, x_.dh(), passes, 2 * local_heads(), after, false,
                                whole);
    return b_.fused_attention(n, label, ph, x_.gemm, ring_block(), x_.dh(), passes, local_heads(), after,
                              causal_ && step == 0, whole);
  }
  void ring_attention_forward(const std::string& p, Phase ph, const std::string& suffix) {
    const int c = static_cast<int>(x_.cp);
    const std::vector<long> start = deps();
    long compute = -1, arrived = -1;  // the last block's kernel; the block received for the next step
    for (int i = 0; i < c; ++i) {
      const long here = arrived;  // block i (i > 0: received during step i-1)
      if (i + 1 < c) arrived = ring_hop(p, "kv", ph, i, ring_kv_bytes(), i == 0 ? start : std::vector<long>{here});
      std::vector<long> d = i == 0 ? start : std::vector<long>{compute, here};
      compute = ring_block_attention(fmt::format("{}attn_ring{}{}", p, i, suffix), "attn_flash" + suffix, ph, i, 2, d);
    }
    last_ = compute;
  }
  // The backward passes the key/value blocks around the ring again, and each block's key/value
  // gradient follows it, accumulated by every device it visits: after step i's kernel the
  // device adds its share to the gradient received from the previous device and sends it on (c
  // hops, the last bringing each block's gradient home; the next op waits for it).
  void ring_attention_backward(const std::string& p) {
    const int c = static_cast<int>(x_.cp);
    const Phase B = Phase::backward;
    const std::vector<long> start = deps();
    long compute = -1, arrived = -1, grad = -1;
    for (int i = 0; i < c; ++i) {
      const long here = arrived;
      if (i + 1 < c) arrived = ring_hop(p, "kv", B, i, ring_kv_bytes(), i == 0 ? start : std::vector<long>{here});
      std::vector<long> d = i == 0 ? start : std::vector<long>{compute, here};
      compute = ring_block_attention(fmt::format("{}attn_ring{}", p, i), "attn_flash.bwd", B, i, 5, d);
      grad = ring_hop(p, "dkv", B, i, ring_kv_bytes(), i == 0 ? std::vector<long>{compute} : std::vector<long>{compute, grad});
    }
    last_ = compute;
    joins_.push_back(grad);
  }

  // All-gather context parallelism (Llama 3 section 3.3.2; Transformer Engine's
  // AttnFuncWithCPAndKVAllGather): the layer's keys and values are all-gathered over "cp" first
  // (exposed: the kernels wait for the whole sequence's), then each of the device's 2 chunks of
  // s/2c queries (chunks r and 2c-1-r) meets the keys it sees. Under the causal mask chunk j meets
  // j whole chunks before it and its own diagonal chunk, so the device's two chunks meet 2c-1 whole
  // chunks and 2 diagonal ones, every device the same; costed as two kernels of their FLOPs: the
  // 2c-1 unmasked s/2c x s/2c blocks (the full-mask kernel) and the 2 diagonal blocks (the causal
  // kernel). Without the mask each chunk meets all 2c chunks. The backward (passes 5) gathers the
  // keys and values again (only the local ones are kept), and the whole sequence's key/value
  // gradients are reduce-scattered over "cp" before the QKV projection's backward takes them.
  // Model FLOPs as the ring's: the plain kernel's s^2 shared by c devices.
  double cp_chunk() const { return x_.s / (2 * x_.cp); }
  double gathered_kv_bytes() const { return x_.cp * ring_kv_bytes(); }  // the whole sequence's K and V
  void all_gather_attention(const std::string& p, Phase ph, const std::string& sfx, int passes) {
    const bool bwd = ph == Phase::backward && sfx == ".bwd";
    const std::string label = bwd ? "attn_flash.bwd" : "attn_flash" + sfx;
    last_ = b_.collective(p + "cp_kv_all_gather" + sfx, "cp_kv_all_gather" + sfx, ph, CollectiveKind::all_gather,
                          CollectiveAlgorithm::ring, "cp", gathered_kv_bytes(), deps());
    const double c = x_.cp, heads = local_heads();
    const double model = c * nominal_work(Kernel::flash_attention,
                                          KernelShape{{std::int64_t(2 * cp_chunk()), std::int64_t(x_.dh()),
                                                       model_attention_passes(passes)},
                                                      std::int64_t(heads)},
                                          x_.gemm)
                                 .flops;
    const double full_blocks = causal_ ? 2 * c - 1 : 4 * c;
    last_ = b_.fused_attention(p + "attn_gathered" + sfx, label, ph, x_.gemm, cp_chunk(), x_.dh(), passes,
                               full_blocks * heads, deps(), false, model * full_blocks / (causal_ ? 2 * c : 4 * c));
    if (causal_)
      last_ = b_.fused_attention(p + "attn_gathered_diagonal" + sfx, label, ph, x_.gemm, cp_chunk(), x_.dh(), passes,
                                 2 * heads, deps(), true, model / (2 * c));
    if (bwd)
      last_ = b_.collective(p + "cp_dkv_reduce_scatter", "cp_dkv_reduce_scatter", ph, CollectiveKind::reduce_scatter,
                            CollectiveAlgorithm::ring, "cp", gathered_kv_bytes(), deps());
  }

  // The scores' dropout (Megatron's attention_dropout, its own kernel under standard attention):
  // reads the softmax output, draws the mask, writes the dropped-out scores and the 1-byte mask
  // (2e + 1 bytes and about 2 flops per element); its backward reads the gradient and the mask
  // and writes the gradient (2e + 1). An element-wise kernel of the vocabulary (the residual
  // add's: one read, one write per element) stands for it. The forward (and its recomputation,
  // which must draw the same mask) draws one 32-bit random word per score; the backward reads
  // the mask.
  void attention_dropout(const std::string& p, Phase ph, const std::string& suffix, const std::string& a) {
    const double n = local_heads() * x_.s * x_.s;
    const bool bwd = suffix == ".bwd";
    last_ = b_.memory(p + a + "_dropout" + (bwd ? "" : suffix), a + "_dropout" + suffix, ph, Kernel::residual_add,
                      x_.score_elementwise, elements(n), 2 * n, (2 * x_.es + 1) * n, deps(), bwd ? 0 : n);
  }

  // The forward of one layer; `recompute`: rerun before its backward (full recomputation).
  void layer_forward(int l, Phase ph, bool recompute) {
    const std::string sfx = recompute ? ".recompute" : "";
    const std::string p = name(fmt::format("L{}.{}.", l, recompute ? "recompute" : "fwd"));
    causal_ = causal_self_attention(l);
    const double Tl = x_.Tl(), Ts = x_.Ts(), dl = x_.dl(), ea = x_.ea, ffl = x_.ff / x_.hs;
    const Precision ew = x_.elementwise;
    if (!recompute) zero3_gather(l, ph);
    special_function(p + "attn_layernorm", "attn_layernorm" + sfx, ph,
                     {Kernel::layer_norm, ew, x_.storage, rows_cols(Ts, dl), 8 * Ts * dl, Ts, dl, 1, 1});
    linear_forward(p, "attn_qkv", sfx, ph, qkv_);
    self_attention([&] { attention_core(p, ph, sfx); });
    linear_forward(p, "attn_proj", sfx, ph, proj_);
    last_ = b_.memory(p + "attn_residual", "attn_residual" + sfx, ph, Kernel::residual_add, ew, elements(Ts * dl),
                      3 * Ts * dl, 3 * Ts * dl * ea, deps(), hidden_dropout_words(Ts * dl));
    if (x_.model.is_decoder_layer(l)) cross_attention_forward(p, ph, sfx);
    special_function(p + "ffn_layernorm", "ffn_layernorm" + sfx, ph,
                     {Kernel::layer_norm, ew, x_.storage, rows_cols(Ts, dl), 8 * Ts * dl, Ts, dl, 1, 1});
    if (x_.model.is_moe_layer(l)) {
      moe_forward(p, ph, sfx);
    } else {
      linear_forward(p, "ffn1", sfx, ph, ffn1_);
      // SwiGLU: silu(gate) x up reads two T x d_ff inputs and writes one (the element-wise
      // activation kernel of the vocabulary, GELU's, stands for it).
      const std::string act = x_.swiglu ? "ffn_swiglu" : "ffn_gelu";
      special_function(p + act, act + sfx, ph,
                       {Kernel::gelu, x_.ffn_storage, x_.ffn_storage, elements(Tl * ffl), 8 * Tl * ffl, Tl, ffl,
                        x_.swiglu ? 2 : 1, 1});
      linear_forward(p, "ffn2", sfx, ph, ffn2_);
    }
    last_ = b_.memory(p + "ffn_residual", "ffn_residual" + sfx, ph, Kernel::residual_add, ew, elements(Ts * dl),
                      3 * Ts * dl, 3 * Ts * dl * ea, deps(), hidden_dropout_words(Ts * dl));
  }
  // The hidden dropout on a sub-layer's output (BERT's hidden_dropout_prob, Megatron's
  // bias-dropout-add), fused into its residual add: the forward (and its recomputation) draws one
  // 32-bit random word per element (ComputeWork::random_words; they cost only where the device's
  // compiler draws them in vector operations, a TPU's). Its mask's bytes stay in the residual add's
  // fused traffic (not added: the add's own count stands for the fused kernel).
  double hidden_dropout_words(double elements) const { return x_.dropout > 0 ? elements : 0; }
  // The MoE layer's FFN: gate, top-k, permute, all-to-all dispatch over "ep" (the plan's
  // algorithm), the local experts on their capacity, all-to-all combine.
  KernelShape gate() const { return per_core(gemm_shape(x_.T, x_.E, x_.d), x_.cores, 0); }
  KernelShape expert_ffn1() const {
    return per_core(gemm_shape(x_.rows_per_expert(), x_.ff, x_.d, x_.local_experts()), x_.cores, 0);
  }
  KernelShape expert_ffn2() const {
    return per_core(gemm_shape(x_.rows_per_expert(), x_.d, x_.ff, x_.local_experts()), x_.cores, 0);
  }
  // The all-to-alls carry the MoE layer's input and output in the residual stream's storage
  // (x_.storage): FastMoE scatters the layer's input as it is and the experts, half modules under
  // layerwise (APEX O2), cast it on arrival and their output back (expert_boundary_cast). Under
  // layerwise that is fp32, as Figure 18 shows: the same communication time in fp32 and mixed.
  double a2a_bytes() const { return x_.exchanged_rows() * x_.d * x_.ea; }
  // The cast of the R x d exchanged rows between the residual stream's storage and the experts'.
  void expert_boundary_cast(const std::string& n, Phase ph) {
    autocast(n, "", "autocast_activation", ph, x_.ffn_storage, x_.storage, x_.expert_rows(), x_.d);
  }
  // The token permutation into and out of the experts' buffers. Ungrouped: a gather of the R x d
  // rows and its scatter. GShard's groups: the gate's one-hot dispatch mask and combine weights
  // [G, S, E, C] are written (materialised, an assumption: XLA may fuse them into the einsum's
  // operand read), then the einsums run on the matrix unit, G products per device:
  // dispatch GSEC,GSM->EGCM (E C x d x S) and combine EGCM,GSEC->GSM (S x d x E C).
  KernelShape dispatch_einsum() const { return gemm_shape(x_.E * x_.C, x_.d, x_.S, x_.groups()); }
  KernelShape combine_einsum() const { return gemm_shape(x_.S, x_.d, x_.E * x_.C, x_.groups()); }
  // The ungrouped permutation: the R x d rows gathered (read and written once).
  void token_permute(const std::string& p, const std::string& op, const std::string& label, Phase ph) {
    const double R = x_.expert_rows(), d = x_.d;
    last_ = b_.memory(p + op, label, ph, Kernel::token_permute, x_.storage, rows_cols(R, d), 0, 2 * R * d * x_.ea,
                      deps());
  }
  // Lingvo's Top2GatingOnLogits between the softmax (gate_topk) and the [G, S, E, C] tensors
  // (gate_masks), per choice i of the k: the argmax over E and the gate einsum GSE,GSE->GS each read
  // the [G, S, E] gates; the exclusive tf.cumsum over S of the one-hot mask_i writes position_i;
  // the over-capacity summary, the position einsum GSE,GSE->GS and mask_i_flat (GSE->GS) each read
  // it, and mask_i_count (GSE->GE) reads it for the next choice's offset; density_1_proxy reads the
  // gates once. So 6 k reads and k writes of G S E = T E elements in the activations' storage
  // (fprop dtype), one operation per element read. Assumed, as XLA fuses: the one-hots (an iota
  // compared with the G S index) and the element-wise products are computed inside their consumer,
  // each reduction or cumsum a kernel of its own (standalone passes: the compiler's fusion does not
  // shrink them further). The cumsum is linear: tf2xla lowers it to a
  // ReduceWindow over the whole axis, which XLA:TPU runs as a scan (JAX's cumsum lowering keeps the
  // ReduceWindow on TPU only: "handled specially by the compiler and is efficient. On other
  // backends, it is O(n^2)", jax/_src/lax/control_flow/loops.py).
  void gate_positions(const std::string& p, Phase ph, const std::string& sfx) {
    const double gse = x_.T * x_.E;
    last_ = b_.standalone_pass(p + "gate_positions", "gate_positions" + sfx, ph, gse, 6 * x_.k * gse,
                               7 * x_.k * gse * x_.ea, deps());
  }
  void dispatch_forward(const std::string& p, Phase ph, const std::string& sfx) {
    if (!x_.grouped()) return token_permute(p, "dispatch_permute", "dispatch_permute" + sfx, ph);
    gate_positions(p, ph, sfx);
    const double masks = x_.T * x_.E * x_.C;  // elements of each [G, S, E, C] tensor
    last_ = b_.memory(p + "gate_masks", "gate_masks" + sfx, ph, Kernel::token_permute, x_.storage,
                      rows_cols(x_.T, x_.E * x_.C), 0, 2 * masks * x_.ea, deps());
    last_ = b_.routing_gemm(p + "dispatch_einsum", "dispatch_einsum" + sfx, ph, x_.gemm, x_.storage,
                            dispatch_einsum(), deps());
  }
  void combine_forward(const std::string& p, Phase ph, const std::string& sfx) {
    if (!x_.grouped()) return token_permute(p, "combine_unpermute", "combine_unpermute" + sfx, ph);
    last_ = b_.routing_gemm(p + "combine_einsum", "combine_einsum" + sfx, ph, x_.gemm, x_.storage, combine_einsum(),
                            deps());
  }
  // The backward: the combine's gradients for the expert outputs (E C x d x S) and for the combine
  // weights, on to the gate (S x E C x d); the dispatch mask has no gradient, so the dispatch's
  // backward is the tokens' gradient alone (S x d x E C).
  void combine_backward(const std::string& p) {
    const Phase B = Phase::backward;
    if (!x_.grouped()) return token_permute(p, "combine_unpermute", "combine_unpermute.bwd", B);
    const KernelShape f = combine_einsum();
    last_ = b_.routing_gemm(p + "combine_einsum.dgrad", "combine_einsum.dgrad", B, x_.gemm, x_.storage,
                            gemm_shape(x_.S, x_.E * x_.C, x_.d, x_.groups()), deps());
    last_ = b_.routing_gemm(p + "combine_einsum.wgrad", "combine_einsum.wgrad", B, x_.gemm, x_.storage,
                            gemm_shape(f.dims[2], f.dims[1], f.dims[0], f.batch), deps());
  }
  void dispatch_backward(const std::string& p) {
    const Phase B = Phase::backward;
    if (!x_.grouped()) return token_permute(p, "dispatch_permute", "dispatch_permute.bwd", B);
    last_ = b_.routing_gemm(p + "dispatch_einsum.dgrad", "dispatch_einsum.dgrad", B, x_.gemm, x_.storage,
                            combine_einsum(), deps());
  }
  void moe_forward(const std::string& p, Phase ph, const std::string& sfx) {
    const double T = x_.T, d = x_.d, E = x_.E, R = x_.expert_rows(), ff = x_.ff;
    const double Re = x_.rows_per_expert(), le = x_.local_experts();
    const Precision f32 = Precision::fp32, g = x_.gate_gemm, e = x_.ffn_gemm, es = x_.ffn_storage, ep = x_.pp.expert_param;
    // The gate reads the layer's activations (x_.storage) and its scores go to the fp32 top-k.
    autocast(p, "gate.weight", "autocast_weight", ph, g, gate_param(x_.pp), d, E);
    autocast(p, "gate.input", "autocast_activation", ph, g, x_.storage, T, d);
    last_ = b_.gemm(p + "gate", "gate" + sfx, ph, g, operands(g, f32), gate(), deps());
    autocast(p, "gate.output", "autocast_activation", ph, g, f32, T, E);
    special_function(p + "gate_topk", "gate_topk" + sfx, ph,
                     {Kernel::gate_topk, f32, f32, rows_cols(T, E, x_.k), 4 * T * E, T, E, 1, 1});
    dispatch_forward(p, ph, sfx);
    last_ = b_.collective(p + "dispatch", "dispatch" + sfx, ph, CollectiveKind::all_to_all, plan_.all_to_all,
                          "ep", x_.ep > 1 ? a2a_bytes() : 0, deps());
    expert_boundary_cast(p + "expert.input", ph);
    autocast_forward(p + "expert_ffn1", ph, e, es, ep, Re, ff, d, le, true);
    last_ = b_.gemm(p + "expert_ffn1", "expert_ffn1" + sfx, ph, e, operands(e, es), expert_ffn1(), deps());
    autocast_forward(p + "expert_ffn1", ph, e, es, ep, Re, ff, d, le, false);
    special_function(p + "expert_gelu", "expert_gelu" + sfx, ph,
                     {Kernel::gelu, es, es, elements(R * ff), 8 * R * ff, R, ff, 1, 1});
    autocast_forward(p + "expert_ffn2", ph, e, es, ep, Re, d, ff, le, true);
    last_ = b_.gemm(p + "expert_ffn2", "expert_ffn2" + sfx, ph, e, operands(e, es), expert_ffn2(), deps());
    autocast_forward(p + "expert_ffn2", ph, e, es, ep, Re, d, ff, le, false);
    expert_boundary_cast(p + "expert.output", ph);
    last_ = b_.collective(p + "combine", "combine" + sfx, ph, CollectiveKind::all_to_all, plan_.all_to_all,
                          "ep", x_.ep > 1 ? a2a_bytes() : 0, deps());
    combine_forward(p, ph, sfx);
  }
  void moe_backward(const std::string& p) {
    const double T = x_.T, d = x_.d, E = x_.E, R = x_.expert_rows(), ff = x_.ff;
    const Phase B = Phase::backward;
    combine_backward(p);
    last_ = b_.collective(p + "combine", "combine.bwd", B, CollectiveKind::all_to_all, plan_.all_to_all,
                          "ep", x_.ep > 1 ? a2a_bytes() : 0, deps());
    expert_boundary_cast(p + "expert.output", B);
    const double Re = x_.rows_per_expert(), le = x_.local_experts();
    const Precision e = x_.ffn_gemm, es = x_.ffn_storage, ep = x_.pp.expert_param;
    autocast_backward(p + "expert_ffn2", e, es, ep, Re, d, ff, le, true);
    last_ = b_.gemm_backward(p + "expert_ffn2", "expert_ffn2", e, operands(e, es), expert_ffn2(), deps());
    autocast_backward(p + "expert_ffn2", e, es, ep, Re, d, ff, le, false);
    special_function(p + "expert_gelu", "expert_gelu.bwd", B,
                     {Kernel::gelu, es, es, elements(R * ff), 8 * R * ff, R, ff, 2, 1, 1});
    autocast_backward(p + "expert_ffn1", e, es, ep, Re, ff, d, le, true);
    last_ = b_.gemm_backward(p + "expert_ffn1", "expert_ffn1", e, operands(e, es), expert_ffn1(), deps());
    autocast_backward(p + "expert_ffn1", e, es, ep, Re, ff, d, le, false);
    expert_boundary_cast(p + "expert.input", B);
    last_ = b_.collective(p + "dispatch", "dispatch.bwd", B, CollectiveKind::all_to_all, plan_.all_to_all,
                          "ep", x_.ep > 1 ? a2a_bytes() : 0, deps());
    dispatch_backward(p);
    special_function(p + "gate_topk", "gate_topk.bwd", B,
                     {Kernel::gate_topk, Precision::fp32, Precision::fp32, rows_cols(T, E, x_.k), 4 * T * E, T, E, 1, 1});
    const Precision g = x_.gate_gemm;
    autocast(p, "gate.grad_output", "autocast_activation.bwd", B, g, Precision::fp32, T, E);
    last_ = b_.gemm_backward(p + "gate", "gate", g, operands(g, Precision::fp32), gate(), deps());
    autocast(p, "gate.grad_input", "autocast_activation.bwd", B, g, x_.storage, T, d);
    autocast(p, "gate.grad_weight", "autocast_weight.bwd", B, g, gate_param(x_.pp), d, E);
  }

  void layer_backward(int l) {
    const std::string p = name(fmt::format("L{}.bwd.", l));
    causal_ = causal_self_attention(l);
    const double Tl = x_.Tl(), Ts = x_.Ts(), dl = x_.dl(), ea = x_.ea, ffl = x_.ff / x_.hs;
    const Phase B = Phase::backward;
    const Precision ew = x_.elementwise;
    zero3_gather(l, B);
    last_ = b_.memory(p + "ffn_residual", "ffn_residual.bwd", B, Kernel::residual_add, ew, elements(Ts * dl),
                      3 * Ts * dl, 6 * Ts * dl * ea, deps());
    if (x_.model.is_moe_layer(l)) {
      moe_backward(p);
    } else {
      linear_backward(p, "ffn2", ffn2_);
      const std::string act = x_.swiglu ? "ffn_swiglu" : "ffn_gelu";  // SwiGLU: 3 read, 2 written
      special_function(p + act, act + ".bwd", B,
                       {Kernel::gelu, x_.ffn_storage, x_.ffn_storage, elements(Tl * ffl), 8 * Tl * ffl, Tl, ffl,
                        x_.swiglu ? 3 : 2, x_.swiglu ? 2 : 1, x_.swiglu ? 2 : 1});
      linear_backward(p, "ffn1", ffn1_);
    }
    special_function(p + "ffn_layernorm", "ffn_layernorm.bwd", B,
                     {Kernel::layer_norm, ew, x_.storage, rows_cols(Ts, dl), 8 * Ts * dl, Ts, dl, 2, 1, 1});
    if (x_.model.is_decoder_layer(l)) cross_attention_backward(p);
    last_ = b_.memory(p + "attn_residual", "attn_residual.bwd", B, Kernel::residual_add, ew, elements(Ts * dl),
                      3 * Ts * dl, 6 * Ts * dl * ea, deps());
    linear_backward(p, "attn_proj", proj_);
    if (plan_.recompute == Recompute::selective) {
      b_.set_recomputing(true);
      attention_core(p, B, ".recompute");
      b_.set_recomputing(false);
    }
    self_attention([&] {
      if (x_.cp > 1 && x_.cp_all_gather)
        all_gather_attention(p, B, ".bwd", 5);
      else if (x_.cp > 1)
        ring_attention_backward(p);
      else
        attention_core_backward(p, "attn");
    });
    linear_backward(p, "attn_qkv", qkv_);
    special_function(p + "attn_layernorm", "attn_layernorm.bwd", B,
                     {Kernel::layer_norm, ew, x_.storage, rows_cols(Ts, dl), 8 * Ts * dl, Ts, dl, 2, 1, 1});
  }
  GraphBuilder b_;
  const Dims& x_;
  const ParallelPlan& plan_;
  int stage_, layers_, vt_;
  int micro_batches_;
  long last_ = -1;
  std::vector<long> joins_;  // collectives the next op waits for besides last_
  TensorLinear qkv_, proj_, ffn1_, ffn2_, logits_, cross_q_, cross_kv_;
  std::vector<long> sends_;
  std::string mb_;
  // Ring attention's messages: tags of their own, after the pipeline's (which stay below 2^40).
  static constexpr long kRingTagBase = 1L << 40;
  // DeepSpeed's exchanges' "ready" messages: a pipeline tag plus this (past the ring's).
  static constexpr long kHandshakeTagBase = 1L << 42;
  long ring_tags_ = 0;
  double stage_dense_params_ = 0;  // set_stage_dense_params
  double stage_no_decay_params_ = 0;  // set_stage_no_decay_params
  // The message tags of the tied embedding's gradient all-reduce between the first and the last
  // stage (tied_grad_all_reduce: DeepSpeed's ReduceTiedGrads and Megatron-LM's embedding-group
  // all-reduce alike).
  static constexpr long kTiedTagBase = 1L << 44;
  // grad_sync overlap: the bucket being filled, the buckets' collectives, the last parameter
  // gather, and the ops off the device's chain that the optimizer waits for.
  double bucket_params_ = 0, bucketed_params_ = 0;
  std::vector<long> bucket_ready_, buckets_, background_;
  long last_gather_ = -1;
  std::vector<std::pair<int, long>> layer_done_;  // (layer, its last backward op), in backward order
  // ZeRO 3 prefetch: the last parameter gather, and the op before the previous layer's first.
  long last_zero3_gather_ = -1, previous_layer_start_ = -1;
  // The replica group the update being built is sharded over (weight-update sharding), or empty.
  std::string sharded_role_;
};

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument(what); }

// The parameters of the layers a pipeline stage holds (all its chunks): outside the experts, and
// the experts' (the whole model's, before the expert-parallel split).
struct StageParameters {
  double dense = 0, experts = 0;
  double no_decay = 0;  // of `dense`, those without weight decay (layer_no_decay_parameters)
};
StageParameters stage_parameters(const ModelSpec& m, const ParallelPlan& plan, int stage) {
  StageParameters out;
  for (int c = 0; c < plan.virtual_stages; ++c) {
    const int vs = c * plan.pipeline + stage, first = first_layer_of_chunk(m.total_layers(), plan, vs);
    for (int l = first; l < first + layers_on_chunk(m.total_layers(), plan, vs); ++l) {
      out.dense += layer_dense_parameters(m, l);
      out.experts += layer_expert_parameters(m, l);
      out.no_decay += layer_no_decay_parameters(m, l);
    }
  }
  return out;
}

// Dense parameters on a stage's device: its layers (their share under the tensor layout) and, on
// the first and last virtual stages' device, the (tied) embedding's share.
double stage_dense_parameters(const ModelSpec& m, const ParallelPlan& plan, const Dims& x, int stage) {
  double dense = stage_parameters(m, plan, stage).dense * x.pf;
  if (stage == 0 && x.V > 0) dense += x.V * x.d * x.pf + (embedding_parameters(m, x.s) - x.V * x.d);
  if (stage == plan.pipeline - 1) dense += head_parameters(m) * x.pf;
  // The last stage's output matrix: the tied embedding's copy (p > 1), or its own (untied).
  if (stage == plan.pipeline - 1 && x.V > 0 && (plan.pipeline > 1 || !m.tied_embeddings)) dense += x.V * x.d * x.pf;
  return dense;
}

Dims transformer_dims(const ModelSpec& m, const TrainingSpec& t, const ParallelPlan& plan, const TensorLayout& layout);

}  // namespace

double stage_dense_parameters(const ModelSpec& m, const TrainingSpec& t, const ParallelPlan& plan, int stage) {
  return stage_dense_parameters(m, plan, transformer_dims(m, t, plan, tensor_layout(plan)), stage);
}

double layer_parameter_fraction(const ParallelPlan& plan) { return tensor_layout(plan).parameter_fraction(); }

void check_transformer_plan(const ModelSpec& m, const TrainingSpec& t, const ParallelPlan& plan) {
  // The plan rules the scenario parser applies, less the machine's (models/plan_rules.hpp).
  if (auto problem = general_plan_problem(m, t, plan, nullptr)) bad(problem->text());
  const TensorLayout layout = tensor_layout(plan);  // throws for a size the mode cannot take
  if (auto why = tensor_split_problem(layout, plan.micro_batch, m.heads, m.d_model, m.d_ff, m.vocab)) bad(*why);
}

DeviceMemory transformer_plan_memory(const ModelSpec& m, const TrainingSpec& t, const ParallelPlan& plan,
                                     const MoeRouting& moe) {
  // Dropless: the activations of the busiest device's expert rows (as if its capacity factor
  // were its rows over T k, T the micro-batch's tokens per context-parallel rank).
  ModelSpec mm = m;
  const double tokens = double(plan.micro_batch) * t.seq_len / plan.context;
  if (!m.dense() && m.dropless()) mm.capacity_factor = moe.busiest_device_rows() / (tokens * m.top_k);
  return worst_stage_memory(mm, t, plan);
}

namespace {
// A stage's items in order; on stage 0 under a folded window, the op ids of the measured
// micro-batches' last backward items (chunk 0: the micro-batch's last on the device).
void build_items(StageBuilder& sb, TransformerWorkload& out, int program, int stage,
                 const std::vector<PipelineItem>& order) {
  const SteadyStateWindow& w = out.window;
  TransformerWorkload::MeasuredItems measured;
  measured.program = program;
  if (w.second >= 0) measured.items.resize(static_cast<size_t>(w.second) + 1);
  for (const PipelineItem& it : order) {
    const long begin = sb.ops();
    sb.item(it);
    if (it.forward || it.chunk != 0) continue;
    if (it.micro_batch <= w.second) measured.items[static_cast<size_t>(it.micro_batch)] = {begin, sb.ops()};
    if (it.micro_batch == w.first) measured.first_begin = begin, measured.first_end = sb.ops();
    if (it.micro_batch == w.second) measured.second_begin = begin, measured.second_end = sb.ops();
  }
  if (stage == 0 && w.folded(out.micro_batches)) out.measured.push_back(measured);
}

// The same under DeepSpeed's engine: its instructions in TrainSchedule's order; a measured
// micro-batch's backward is its backward compute.
void build_deepspeed_items(StageBuilder& sb, TransformerWorkload& out, int program, int stage,
                           const std::vector<DeepSpeedInstruction>& order) {
  const SteadyStateWindow& w = out.window;
  TransformerWorkload::MeasuredItems measured{program};
  for (const DeepSpeedInstruction& in : order) {
    const long begin = sb.ops();
    sb.deepspeed_instruction(in);
    if (in.kind != DeepSpeedInstruction::Kind::backward) continue;
    if (in.micro_batch == w.first) measured.first_begin = begin, measured.first_end = sb.ops();
    if (in.micro_batch == w.second) measured.second_begin = begin, measured.second_end = sb.ops();
  }
  if (stage == 0 && w.folded(out.micro_batches)) out.measured.push_back(measured);
}
}  // namespace

TransformerWorkload build_transformer_workload(const ModelSpec& m, const TrainingSpec& t, const ParallelPlan& plan,
                                               int cores_per_device, WorkloadBuild build) {
  check_transformer_plan(m, t, plan);
  return build_placed_transformer_workload(m, t, plan, cores_per_device, build);
}

namespace {
// The shapes, precisions and switches one stage's builder reads (Dims), from the model, the
// training and the plan.
Dims transformer_dims(const ModelSpec& m, const TrainingSpec& t, const ParallelPlan& plan, const TensorLayout& layout) {
  Dims x;
  x.b = plan.micro_batch;
  x.s = t.seq_len;
  x.cp = plan.context;
  x.cp_all_gather = plan.context_algorithm == ParallelPlan::ContextParallelAlgorithm::all_gather;
  x.T = x.b * x.s / x.cp;
  std::tie(x.d, x.h, x.ff, x.V) = std::make_tuple(m.d_model, m.heads, m.d_ff, m.vocab);
  x.t = plan.tensor;
  x.tl = layout;
  x.tok = layout.token_split();
  x.fs = layout.feature_split();
  x.hs = layout.mode == TensorMode::one_d ? layout.size : layout.q;
  x.ss = layout.sequence_split();
  x.pf = layout.parameter_fraction();
  if (!m.dense()) {
    x.E = m.experts_per_layer;
    x.k = m.top_k;
    x.cf = m.capacity_factor;
    x.ep = plan.expert;
    if (m.grouped()) x.S = m.group_size, x.C = m.group_capacity();
  }
  x.pp = precision_plan(t.precision);
  x.gemm = x.pp.attn_gemm;
  x.storage = x.pp.attn_act;
  x.elementwise = x.pp.elementwise;
  x.ffn_gemm = x.pp.ffn_gemm;
  x.ffn_storage = x.pp.ffn_act;
  x.gate_gemm = x.pp.gate_gemm;
  x.fp8 = t.precision == PrecisionPolicy::fp8;
  x.optimizer = t.optimizer;
  x.ea = bytes_per_element(x.storage);
  x.es = t.attention_logits == TrainingSpec::AttentionLogits::fp32 ? 4 : x.ea;
  x.score_elementwise = t.attention_logits == TrainingSpec::AttentionLogits::fp32 ? Precision::fp32 : x.elementwise;
  x.ef = bytes_per_element(x.ffn_storage);
  x.overlap = t.grad_sync == GradSync::overlap;
  x.per_tensor = t.grad_sync == GradSync::per_tensor;
  x.clip_before_reduction = t.grad_clip == GradClip::before_reduction;
  const bool deepspeed = plan.pipeline_engine == PipelineEngine::deepspeed;
  x.bf16_optimizer = deepspeed && t.precision == PrecisionPolicy::bf16 &&
                     plan.grad_accum_dtype.value_or(GradAccumDtype::fp32) == GradAccumDtype::fp32;
  x.autograd_accumulation = deepspeed && !x.bf16_optimizer;
  x.zero_bucketed_reduce = x.autograd_accumulation && plan.zero_stage == 1;
  x.kv = m.key_value_heads();
  x.swiglu = m.ffn == ModelSpec::Ffn::swiglu;
  x.flash = plan.attention == ParallelPlan::Attention::flash;
  x.dropout = m.dropout_probability();
  return x;
}

// Dropless MoE: the distinct expert-row counts of an expert-parallel group's devices, and each
// device's (by index in its ep group) row class; one class (rows {0}) otherwise.
struct ExpertRowPrograms {
  std::vector<double> rows{0};
  std::vector<int> row_of_ep_index;
};

// One program per stage; dropless, one per stage and distinct expert rows: device j of each
// expert-parallel group computes the rows its experts receive (program stage x R + row index),
// and its ranks' program and class are set here.
ExpertRowPrograms expert_row_programs(const ModelSpec& m, const ParallelPlan& plan, TransformerWorkload& out) {
  ExpertRowPrograms er;
  std::vector<double>& rows = er.rows;
  er.row_of_ep_index.assign(plan.expert, 0);
  std::vector<int>& row_of_ep_index = er.row_of_ep_index;
  if (!m.dense() && m.dropless()) {
    rows.clear();
    for (int j = 0; j < plan.expert; ++j) {
      const double r = out.moe.expert_rows_per_device[j];
      auto it = std::find(rows.begin(), rows.end(), r);
      row_of_ep_index[j] = static_cast<int>(it - rows.begin());
      if (it == rows.end()) rows.push_back(r);
    }
  }
  const int R = static_cast<int>(rows.size());
  if (R > 1) {
    const GroupTable& ep = out.workload.groups.at("ep");
    for (int r = 0; r < out.workload.rank_count; ++r) {
      const int p = out.placement.coords[r].pipeline * R + row_of_ep_index.at(ep.index_in_group.at(r));
      out.workload.program_of_rank[r] = p;
      out.workload.class_of_rank[r] = p;
    }
  }
  return er;
}
}  // namespace

TransformerWorkload build_placed_transformer_workload(const ModelSpec& m, const TrainingSpec& t,
                                                      const ParallelPlan& plan, int cores_per_device,
                                                      WorkloadBuild build) {
  // (the general rules are the caller's: check_transformer_plan, or MoDa's own; the family's here)
  if (auto problem = transformer_family_problem(m, t, plan, cores_per_device)) bad(problem->text());
  const TensorLayout layout = tensor_layout(plan);  // throws for a size the mode cannot take
  if (auto why = tensor_split_problem(layout, plan.micro_batch, m.heads, m.d_model, m.d_ff, m.vocab)) bad(*why);
  TransformerWorkload out;
  out.placement = place_plan(plan, out.workload);
  Dims x = transformer_dims(m, t, plan, layout);
  x.pp.main_grad_step = x.pp.main_grad_step && !build.fused_optimizer_step;
  x.tied_grad_exchange = build.tied_grad_exchange;

  out.micro_batches = plan.micro_batches();
  out.window = build.fold_in_time ? steady_state_window(plan.schedule, plan.pipeline, out.micro_batches, plan.virtual_stages,
                                                        build.settling_periods)
                            : SteadyStateWindow{out.micro_batches};
  const int mbs = out.window.simulated;
  // Every micro-batch has the same flops: the ones not built are counted as the built ones.
  const double unbuilt_per_built = double(out.micro_batches - mbs) / mbs;
  // Parameters as models/transformer_parameters.hpp counts them (Megatron's count per layer, dense
  // or MoE, encoder or decoder; a model without a vocabulary, BaGuaLu's MoDa, has no embedding).
  x.model = m;
  x.cores = cores_per_device;
  out.parameters = transformer_parameters(m, x.s);
  if (!m.dense())
    for (int l = 0; l < m.total_layers(); ++l) out.expert_parameters += layer_expert_parameters(m, l);
  if (!m.dense()) out.moe = moe_routing(m, x.T, plan.expert);
  const ExpertRowPrograms er = expert_row_programs(m, plan, out);
  const std::vector<double>& rows = er.rows;
  const std::vector<int>& row_of_ep_index = er.row_of_ep_index;
  const int R = static_cast<int>(rows.size());
  std::vector<int> devices_with_rows(R, 0);
  for (int j = 0; j < plan.expert; ++j) devices_with_rows[row_of_ep_index[j]]++;
  out.workload.programs.assign(plan.pipeline * R, StepGraph());
  std::vector<Dims> xs(R, x);  // (StageBuilder keeps a reference)
  for (int prog = 0; prog < plan.pipeline * R; ++prog) {
    const int stage = prog / R, ri = prog % R;
    xs[ri].dropless = !m.dense() && m.dropless();
    xs[ri].dropless_rows = rows[ri];
    if (prog > 0) {  // stages build about as many ops as the one before: room for that and 1/8 more
      const StepGraph& before = out.workload.programs[prog - 1];
      reserve_ops(out.workload.programs[prog], boost::num_vertices(before) * 9 / 8, boost::num_edges(before) * 9 / 8);
    }
    StageBuilder sb(out.workload.programs[prog], xs[ri], plan, stage, m.total_layers(), mbs);
    const double flops_before = sb.executed_flops(), model_flops_before = sb.model_flops();
    sb.set_stage_dense_params(stage_dense_parameters(m, plan, x, stage));
    sb.set_stage_no_decay_params(stage_parameters(m, plan, stage).no_decay * x.pf);
    if (plan.pipeline_engine == PipelineEngine::deepspeed)
      build_deepspeed_items(sb, out, prog, stage, deepspeed_train_order(plan.pipeline, mbs, stage));
    else
      build_items(sb, out, prog, stage, pipeline_order(plan.schedule, plan.pipeline, mbs, plan.virtual_stages, stage));
    const double item_flops = sb.executed_flops() - flops_before, item_model_flops = sb.model_flops() - model_flops_before;
    out.item_ops_end.push_back(sb.ops());
    const StageParameters here = stage_parameters(m, plan, stage);
    sb.optimizer(stage_dense_parameters(m, plan, x, stage), here.experts / plan.expert);
    const double ranks_per_stage = double(plan.tensor) * plan.gradient_replicas() * devices_with_rows[ri] / plan.expert;
    out.executed_flops += (sb.executed_flops() + item_flops * unbuilt_per_built) * ranks_per_stage;
    // The first micro-batch has no autograd accumulation (grad_accumulation): the built items hold
    // (built - 1) of the m - 1 passes, so scaling them by m / built leaves out m / built - 1 of them.
    if (x.autograd_accumulation)
      out.executed_flops += stage_dense_parameters(m, plan, x, stage) * unbuilt_per_built * ranks_per_stage;
    out.model_flops += (sb.model_flops() + item_model_flops * unbuilt_per_built) * ranks_per_stage;
    // Recomputation runs inside the items only (a backward's forward), so it scales as they do.
    out.recomputed_model_flops += sb.recomputed_model_flops() * (1 + unbuilt_per_built) * ranks_per_stage;
    out.masked_attention_model_flops += sb.masked_attention_model_flops() * (1 + unbuilt_per_built) * ranks_per_stage;
    out.program_flops.push_back({item_flops, item_model_flops, sb.executed_flops() - item_flops,
                                 sb.model_flops() - item_model_flops});
  }
  out.tokens_per_step = double(plan.global_batch) * t.seq_len;
  out.memory = transformer_plan_memory(m, t, plan, out.moe);
  return out;
}

}  // namespace exasim
