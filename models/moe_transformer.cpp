#include "models/moe_transformer.hpp"

#include <fmt/format.h>

#include <vector>

#include "models/graph_builder.hpp"
#include "models/precision.hpp"

namespace exasim {

MoeWorkload build_moe_workload(const ModelSpec& m, const TrainingSpec& t, const PlanSpec& plan, int machine_nps,
                               double memory_bytes_per_node) {
  MoeWorkload out;
  out.placement = place_moe_ranks(m, plan, machine_nps, out.workload);
  const Placement& pl = out.placement;
  const PrecisionPlan pp = moda_precision_plan(t.precision);
  const double T = double(t.micro_batch_per_node) * t.seq_len;  // tokens per node per micro-batch
  const double s = t.seq_len, d = m.d_model, h = m.heads, ff = m.d_ff, E = m.experts_per_layer, k = m.top_k;
  const double Tk = T * k;  // SWIPE: each node's expert receives exactly its capacity, T*k tokens
  const double ea = bytes_per_element(pp.attn_act), ef = bytes_per_element(pp.ffn_act);
  const CollectiveAlgorithm a2a = plan.all_to_all;

  // Parameters per node: one expert per layer (the MoE group has one member per expert),
  // and the shared attention, gate and layer-norm parameters.
  const double expert_params = 2 * d * ff;                   // per layer
  const double shared_params = 4 * d * d + d * E + 4 * d;    // per layer
  out.parameters = m.layers * (E * expert_params + shared_params);

  GraphBuilder b(out.workload.programs[0]);
  long last = -1;
  std::vector<long> layer_backward_done(m.layers, -1);  // in the last micro-batch
  // GEMM shapes (forward): the attention's batched products run per sequence and head.
  const double bh = double(t.micro_batch_per_node) * h, dh = d / h;
  const KernelShape qkv = gemm_shape(T, 3 * d, d), scores = gemm_shape(s, s, dh, bh), context = gemm_shape(s, dh, s, bh),
                    proj = gemm_shape(T, d, d), gate = gemm_shape(T, E, d), ffn1 = gemm_shape(Tk, ff, d),
                    ffn2 = gemm_shape(Tk, d, ff);
  const KernelShape norm_rows = rows_cols(T, d), softmax_rows = rows_cols(T * h, s), topk = rows_cols(T, E, k),
                    permute_rows = rows_cols(Tk, d), gelu_n = elements(Tk * ff), residual_n = elements(T * d);
  for (int mb = 0; mb < t.micro_batches; ++mb) {
    const std::string mbs = t.micro_batches > 1 ? fmt::format("mb{}.", mb) : "";
    for (int l = 0; l < m.layers; ++l) {
      const std::string p = fmt::format("{}L{}.fwd.", mbs, l);
      const Phase F = Phase::forward;
      const Precision ew = pp.elementwise;
      last = b.memory(p + "attn_layernorm", "attn_layernorm", F, Kernel::layer_norm, ew, norm_rows, 8 * T * d, 2 * T * d * ea, last);
      last = b.gemm(p + "attn_qkv", "attn_qkv", F, pp.attn_gemm, pp.attn_act, qkv, last);
      last = b.gemm(p + "attn_scores", "attn_scores", F, pp.attn_gemm, pp.attn_act, scores, last);
      last = b.memory(p + "attn_softmax", "attn_softmax", F, Kernel::softmax, ew, softmax_rows, 5 * T * s * h, 2 * T * s * h * ea, last);
      last = b.gemm(p + "attn_context", "attn_context", F, pp.attn_gemm, pp.attn_act, context, last);
      last = b.gemm(p + "attn_proj", "attn_proj", F, pp.attn_gemm, pp.attn_act, proj, last);
      last = b.memory(p + "ffn_layernorm", "ffn_layernorm", F, Kernel::layer_norm, ew, norm_rows, 10 * T * d, 5 * T * d * ea, last);
      last = b.gemm(p + "gate", "gate", F, pp.gate_gemm, Precision::fp32, gate, last);
      last = b.memory(p + "gate_topk", "gate_topk", F, Kernel::gate_topk, Precision::fp32, topk, 4 * T * E, 2 * T * E * 4, last);
      last = b.memory(p + "dispatch_permute", "dispatch_permute", F, Kernel::token_permute, pp.ffn_act, permute_rows, 0, 2 * Tk * d * ef, last);
      last = b.collective(p + "dispatch", "dispatch", F, CollectiveKind::all_to_all, a2a, "moe", Tk * d * ef, {last});
      last = b.gemm(p + "expert_ffn1", "expert_ffn1", F, pp.ffn_gemm, pp.ffn_act, ffn1, last);
      last = b.memory(p + "expert_gelu", "expert_gelu", F, Kernel::gelu, pp.ffn_act, gelu_n, 8 * Tk * ff, 2 * Tk * ff * ef, last);
      last = b.gemm(p + "expert_ffn2", "expert_ffn2", F, pp.ffn_gemm, pp.ffn_act, ffn2, last);
      last = b.collective(p + "combine", "combine", F, CollectiveKind::all_to_all, a2a, "moe", Tk * d * ef, {last});
      last = b.memory(p + "combine_unpermute", "combine_unpermute", F, Kernel::token_permute, pp.ffn_act, permute_rows, 0, 2 * Tk * d * ef, last);
      last = b.memory(p + "combine_residual", "combine_residual", F, Kernel::residual_add, ew, residual_n, 3 * T * d, 3 * T * d * ea, last);
    }
    // Backward: each GEMM's data and weight gradients (two GEMMs of the forward's FLOPs); a
    // memory-bound kernel's backward moves about twice its bytes, at the forward kernel's
    // efficiency for the same shape.
    for (int l = m.layers - 1; l >= 0; --l) {
      const std::string p = fmt::format("{}L{}.bwd.", mbs, l);
      const Phase B = Phase::backward;
      const Precision ew = pp.elementwise;
      last = b.memory(p + "combine_residual", "combine_residual.bwd", B, Kernel::residual_add, ew, residual_n, 3 * T * d, 6 * T * d * ea, last);
      last = b.memory(p + "combine_unpermute", "combine_unpermute.bwd", B, Kernel::token_permute, pp.ffn_act, permute_rows, 0, 2 * Tk * d * ef, last);
      last = b.collective(p + "combine", "combine.bwd", B, CollectiveKind::all_to_all, a2a, "moe", Tk * d * ef, {last});
      last = b.gemm_backward(p + "expert_ffn2", "expert_ffn2", pp.ffn_gemm, pp.ffn_act, ffn2, last);
      last = b.memory(p + "expert_gelu", "expert_gelu.bwd", B, Kernel::gelu, pp.ffn_act, gelu_n, 8 * Tk * ff, 3 * Tk * ff * ef, last);
      last = b.gemm_backward(p + "expert_ffn1", "expert_ffn1", pp.ffn_gemm, pp.ffn_act, ffn1, last);
      last = b.collective(p + "dispatch", "dispatch.bwd", B, CollectiveKind::all_to_all, a2a, "moe", Tk * d * ef, {last});
      last = b.memory(p + "dispatch_permute", "dispatch_permute.bwd", B, Kernel::token_permute, pp.ffn_act, permute_rows, 0, 2 * Tk * d * ef, last);
      last = b.memory(p + "gate_topk", "gate_topk.bwd", B, Kernel::gate_topk, Precision::fp32, topk, 4 * T * E, 2 * T * E * 4, last);
      last = b.gemm_backward(p + "gate", "gate", pp.gate_gemm, Precision::fp32, gate, last);
      last = b.memory(p + "ffn_layernorm", "ffn_layernorm.bwd", B, Kernel::layer_norm, ew, norm_rows, 10 * T * d, 8 * T * d * ea, last);
      last = b.gemm_backward(p + "attn_proj", "attn_proj", pp.attn_gemm, pp.attn_act, proj, last);
      last = b.gemm_backward(p + "attn_context", "attn_context", pp.attn_gemm, pp.attn_act, context, last);
      last = b.memory(p + "attn_softmax", "attn_softmax.bwd", B, Kernel::softmax, ew, softmax_rows, 5 * T * s * h, 3 * T * s * h * ea, last);
      last = b.gemm_backward(p + "attn_scores", "attn_scores", pp.attn_gemm, pp.attn_act, scores, last);
      last = b.gemm_backward(p + "attn_qkv", "attn_qkv", pp.attn_gemm, pp.attn_act, qkv, last);
      last = b.memory(p + "attn_layernorm", "attn_layernorm.bwd", B, Kernel::layer_norm, ew, norm_rows, 8 * T * d, 3 * T * d * ea, last);
      layer_backward_done[l] = last;
    }
  }
  const long backward_done = last;

  // Gradient reduction and optimizer, per layer in backward order.
  const bool paro = plan.paro && pl.replicas > 1;
  const double eg = bytes_per_element(pp.expert_grad), ep = bytes_per_element(pp.expert_param);
  const double sg = bytes_per_element(pp.shared_grad), sp = bytes_per_element(pp.shared_param);
  // Adam moves 28 bytes and runs 12 flops per parameter (nominal_work): fp32 reads param, grad,
  // m, v and writes param, m, v; mixed reads the fp32 master, fp16 grad, m, v and writes
  // master, m, v and the fp16 copy.
  const double K = pl.nodes_per_supernode_used;
  const Phase O = Phase::optimizer;
  // ParO is the optimizer: its gradient reduce-scatter, the update of the shard and the parameter
  // all-gather form the optimizer step (BaGuaLu Figure 18: backward communication is the backward
  // all-to-alls alone). Without ParO, gradients are all-reduced as the backward pass's communication.
  const Phase G = paro ? Phase::optimizer : Phase::backward;
  // after_backward: the reductions start when the whole backward pass is done; overlap: a
  // layer's reductions start as soon as its own backward is done (in backward order, one
  // after another), while the backward of the layers below goes on. The update waits for
  // the whole backward pass either way.
  const bool overlap = t.grad_sync == GradSync::overlap;
  long comm = overlap ? -1 : backward_done, adam = backward_done;
  for (int l = m.layers - 1; l >= 0; --l) {
    const std::string p = fmt::format("L{}.opt.", l), gp = fmt::format("L{}.grad.", l);
    const long grads_ready = overlap ? layer_backward_done[l] : backward_done;
    // Expert parameters: reduced among the expert's replicas.
    double expert_shard = expert_params;
    long expert_grads_ready = backward_done;
    if (pl.replicas > 1) {
      if (paro) {
        comm = b.collective(gp + "expert_grad_reduce_scatter", "expert_grad_reduce_scatter", G, CollectiveKind::reduce_scatter,
                            CollectiveAlgorithm::ring, "expert_replicas", expert_params * eg, {comm, grads_ready});
        expert_shard = expert_params / pl.replicas;
      } else {
        comm = b.collective(gp + "expert_grad_all_reduce", "expert_grad_all_reduce", G, CollectiveKind::all_reduce,
                            CollectiveAlgorithm::ring, "expert_replicas", expert_params * eg, {comm, grads_ready});
      }
      expert_grads_ready = comm;
    }
    // Shared parameters (attention, gate, norms): hierarchical all-reduce as ParO does it:
    // reduce-scatter inside the supernode, all-reduce across supernodes, all-gather inside.
    comm = b.collective(gp + "shared_grad_reduce_scatter", "shared_grad_reduce_scatter", G, CollectiveKind::reduce_scatter,
                        CollectiveAlgorithm::ring, "supernode", shared_params * sg, {comm, grads_ready});
    comm = b.collective(gp + "shared_grad_all_reduce", "shared_grad_all_reduce", G, CollectiveKind::all_reduce,
                        CollectiveAlgorithm::ring, "across_supernodes", shared_params * sg / K, {comm});
    const double shared_shard = paro ? shared_params / K : shared_params;
    long shared_ready = comm;
    if (!paro) {
      comm = b.collective(gp + "shared_grad_all_gather", "shared_grad_all_gather", G, CollectiveKind::all_gather,
                          CollectiveAlgorithm::ring, "supernode", shared_params * sg, {comm});
      shared_ready = comm;
    }
    // APEX O2 (the half experts of layer-wise mixed precision): the reduced half gradients of the
    // shard are unscaled into fp32 master gradients, Adam updates the fp32 master weights, which
    // are copied back into the half model weights that the all-gather then shares.
    if (pp.expert_master_bytes > 0)
      adam = b.memory(p + "expert_master_grad", "expert_master_grad", O, Kernel::residual_add, Precision::fp32,
                      elements(expert_shard), expert_shard, expert_shard * (eg + 4), {adam, expert_grads_ready});
    adam = b.optimizer_update(p + "expert_adam", "expert_adam", expert_shard, {adam, expert_grads_ready});
    if (pp.expert_master_bytes > 0)
      adam = b.memory(p + "expert_master_to_model", "expert_master_to_model", O, Kernel::residual_add, Precision::fp32,
                      elements(expert_shard), 0, expert_shard * (4 + ep), {adam});
    if (paro && pl.replicas > 1)
      b.collective(p + "expert_param_all_gather", "expert_param_all_gather", O, CollectiveKind::all_gather,
                   CollectiveAlgorithm::ring, "expert_replicas", expert_params * ep, {adam});
    if (pp.shared_master_bytes > 0)
      adam = b.memory(p + "shared_master_grad", "shared_master_grad", O, Kernel::residual_add, Precision::fp32,
                      elements(shared_shard), shared_shard, shared_shard * (sg + 4), {adam, shared_ready});
    adam = b.optimizer_update(p + "shared_adam", "shared_adam", shared_shard, {adam, shared_ready});
    if (pp.shared_master_bytes > 0)
      adam = b.memory(p + "shared_master_to_model", "shared_master_to_model", O, Kernel::residual_add,
                      Precision::fp32, elements(shared_shard), 0, shared_shard * (4 + sp), {adam});
    if (paro)
      b.collective(p + "shared_param_all_gather", "shared_param_all_gather", O, CollectiveKind::all_gather,
                   CollectiveAlgorithm::ring, "supernode", shared_params * sp, {adam});
  }

  out.executed_flops_per_rank = b.executed_flops();
  out.model_flops_per_rank = b.model_flops();
  out.tokens_per_step = T * t.micro_batches * pl.ranks;

  // Memory per node.
  MemoryPerNode& mem = out.memory;
  const double L = m.layers;
  mem.parameters_bytes = L * (expert_params * ep + shared_params * sp);
  mem.gradients_bytes = L * (expert_params * eg + shared_params * sg);
  // Adam's m and v in fp32, plus the fp32 master copy where the mode keeps one.
  mem.optimizer_state_bytes = L * (expert_params * (8 + pp.expert_master_bytes) / (paro ? pl.replicas : 1) +
                                   shared_params * (8 + pp.shared_master_bytes) / (paro ? K : 1));
  // Activations kept for the backward pass of one micro-batch (micro-batches run one after another).
  const double per_layer_act = T * (6 * d + h * s) * ea + T * E * 4 + Tk * (2 * d + 2 * ff) * ef;
  mem.activations_bytes = L * per_layer_act;
  if (mem.total_bytes() > memory_bytes_per_node)
    throw DoesNotFitError(fmt::format(
        "the plan does not fit: needs {:.1f} GB per node (parameters {:.1f}, gradients {:.1f}, optimizer state {:.1f}, "
        "activations {:.1f}), has {:.1f} GB",
        mem.total_bytes() / 1e9, mem.parameters_bytes / 1e9, mem.gradients_bytes / 1e9, mem.optimizer_state_bytes / 1e9,
        mem.activations_bytes / 1e9, memory_bytes_per_node / 1e9));
  return out;
}

}  // namespace exasim
