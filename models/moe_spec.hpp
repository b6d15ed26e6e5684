// The MoE model, training settings and parallel plan as a scenario describes them.
#pragma once
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "models/convnet_spec.hpp"
#include "sim/step_graph.hpp"

namespace exasim {

// How the gate spreads the routed token-slots over the experts (expected loads, not random
// draws, so that runs are deterministic). uniform: every expert receives T k ep / E of an expert-
// parallel group's T k ep slots per micro-batch. zipf: expert e (index order, fixed) receives the
// share (1 / (e + 1)^s) / sum_j 1 / (j + 1)^s, capped at 1 / k (a token picks an expert at most
// once under top-k; the excess goes to the other experts in proportion to their shares).
enum class RouterDistribution { uniform, zipf };
const char* to_string(RouterDistribution d);

struct RouterSpec {
  RouterDistribution distribution = RouterDistribution::uniform;
  double zipf_s = 1.0;  // the Zipf exponent s (zipf only)
};

struct ModelSpec {
  std::string name;
  int layers = 0;
  int d_model = 0;
  int heads = 0;
  int d_ff = 0;
  int experts_per_layer = 0;  // 0: a dense transformer; else every layer is an MoE layer
  int top_k = 1;
  // Expert capacity = tokens * top_k / experts * capacity_factor (GShard's groups: capacity_rule
  // below); 0 (general plans): dropless, no capacity: each device computes the rows its experts receive.
  double capacity_factor = 1.0;
  bool dropless() const { return capacity_factor == 0; }
  // GShard's groups (Lepikhin et al. 2020, Algorithm 1 and its einsum listing): a device's tokens
  // are split into groups of group_size (S) tokens, each gated on its own with an expert capacity
  // of C rows per group (capacity_rule); the dispatch and combine are einsums GSEC,GSM->EGCM and
  // EGCM,GSEC->GSM. 0: no groups (one capacity over the expert-parallel group's tokens, a gather
  // and scatter permutation).
  int group_size = 0;
  bool grouped() const { return group_size > 0 && !dense(); }
  // How the gating implementation sizes C from the capacity factor (grouped models only):
  //   ceil    C = ceil(cf k S / E), at least one row: the paper's cf k S / E in whole rows
  //   lingvo  Lingvo's Top2GatingOnLogits (lingvo/core/gshard_layers.py; praxis's gshard
  //           _compute_expert_capacity is the same): auto = int(S cf / E), top_k not in it; where
  //           auto exceeds the set expert_capacity_dim (praxis: 1 when unset) C = auto, "rounded up
  //           to a multiple of 4 to avoid possible padding", else C stays expert_capacity_dim (1).
  // Not a rule here: mesh-tensorflow's transformer/moe.py (its top-2 and Switch gating alike) takes
  // min(S, int(S cf / E)), no rounding; no shipped scenario groups Mesh-TF's or Switch's tokens.
  enum class CapacityRule { ceil, lingvo };
  CapacityRule capacity_rule = CapacityRule::ceil;
  double group_capacity() const {
    if (capacity_rule == CapacityRule::lingvo) {
      const double autoc = std::floor(double(group_size) * capacity_factor / experts_per_layer);
      return autoc > 1 ? 4 * std::ceil(autoc / 4) : 1;
    }
    return std::max(1.0, std::ceil(capacity_factor * top_k * double(group_size) / experts_per_layer));
  }
  // The padded expert rows per routed token: cf k, or E C / S under GShard's groups (C rounded).
  double padded_slots_per_token() const {
    return grouped() ? experts_per_layer * group_capacity() / group_size : capacity_factor * top_k;
  }
  RouterSpec router;             // general plans: tokens over an expert's capacity are dropped
  int vocab = 0;                 // 0: embedding and logits not modelled (BaGuaLu's MoDa models)
  // "family": "resnet": a convolutional network (models/convnet.hpp); the transformer fields stay unset.
  ConvNetSpec convnet;
  bool is_convnet() const { return !convnet.empty(); }
  // Grouped-query attention (Ainslie et al. 2023): kv_heads key/value heads shared by groups of
  // the query heads; 0 means kv_heads = heads (multi-head), 1 multi-query.
  int kv_heads = 0;
  int key_value_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  // The feed-forward: GELU (two d x d_ff matrices) or SwiGLU (Shazeer 2020: gate and up
  // projections d x d_ff, the down projection d_ff x d, as Llama).
  enum class Ffn { gelu, swiglu };
  Ffn ffn = Ffn::gelu;
  // Tied: the logits reuse the word embedding's matrix (GPT, Megatron); untied: their own V x d.
  bool tied_embeddings = true;
  // Dropout probability (Megatron's attention_dropout and hidden_dropout, 0.1 by default): under
  // standard attention the s x s scores' dropout is a kernel of its own (FlashAttention fuses
  // it), and the memory model keeps its masks; 0 removes both (Llama trains without dropout).
  std::optional<double> dropout;  // unset: 0.1
  double dropout_probability() const { return dropout.value_or(0.1); }
  bool dense() const { return experts_per_layer == 0; }
  // The family, in one layer vocabulary: decoder-only (GPT, causal self-attention, the logits
  // over every token), encoder-only (BERT: the same layers, a masked-LM head on the masked
  // tokens and a next-sentence head) or encoder-decoder (T5, GShard, Switch: `layers` encoder
  // layers, then `decoder_layers` decoder layers that add cross-attention over the encoder's
  // output; the logits over the decoder's tokens).
  enum class Architecture { decoder, encoder, encoder_decoder };
  Architecture architecture = Architecture::decoder;
  int decoder_layers = 0;         // encoder_decoder only
  int total_layers() const { return layers + decoder_layers; }
  bool is_decoder_layer(int l) const { return architecture == Architecture::encoder_decoder && l >= layers; }
  // MoE models: every moe_every-th layer of the encoder and of the decoder is an MoE layer, the
  // others dense (GShard and Switch: 2, the second of each pair); 1: every layer.
  int moe_every = 1;
  bool is_moe_layer(int l) const {
    if (dense()) return false;
    const int i = is_decoder_layer(l) ? l - layers : l;
    return (i + 1) % moe_every == 0;
  }
  // Encoder-only: the fraction of the tokens the masked-LM head predicts (BERT: 15 %) and the
  // next-sentence head (a pooler d x d on the first token and a 2-way classifier).
  double masked_fraction = 0.15;
  bool next_sentence = true;
  // How the token embedding is looked up: a gather of one row per token (gather), or, as
  // google-research/bert does on a TPU (run_pretraining.py: use_one_hot_embeddings=FLAGS.use_tpu;
  // modeling.py embedding_lookup), the one-hot tokens times the table on the matrix unit
  // (one_hot_matmul): a tokens x vocab x d GEMM forward and the table's gradient, one-hot^T times the
  // output gradient, backward (executed, not model, FLOPs: models/transformer.cpp embedding).
  enum class EmbeddingLookup { gather, one_hot_matmul };
  EmbeddingLookup embedding_lookup = EmbeddingLookup::gather;
};

// The one name tables of the model's enums: the scenario's words and the report's.
inline const char* to_string(ModelSpec::Ffn f) { return f == ModelSpec::Ffn::swiglu ? "swiglu" : "gelu"; }
inline const char* to_string(ModelSpec::Architecture a) {
  switch (a) {
    case ModelSpec::Architecture::encoder: return "encoder";
    case ModelSpec::Architecture::encoder_decoder: return "encoder_decoder";
    case ModelSpec::Architecture::decoder: break;
  }
  return "decoder";
}

inline const char* to_string(ModelSpec::CapacityRule c) {
  return c == ModelSpec::CapacityRule::lingvo ? "lingvo" : "ceil";
}

inline const char* to_string(ModelSpec::EmbeddingLookup e) {
  return e == ModelSpec::EmbeddingLookup::one_hot_matmul ? "one_hot_matmul" : "gather";
}

// fp32: everything in fp32; mixed: BaGuaLu's layer-wise mixed precision ("layerwise"); apex_o1,
// apex_o2: APEX's autocast and almost-all-half modes (MoDa plans; models/precision.hpp has the
// table); fp16: Megatron-LM's mixed precision (GEMMs and activations in fp16, fp32 master
// weights and Adam state; general plans); bf16: as fp16 in bfloat16, which runs at the same
// tensor-core rate as fp16 on A100 and H100 (their datasheets' dense peaks; general plans).
// fp8 (general plans): Transformer Engine's recipe, bf16 training with the linears' GEMMs in fp8
// (models/transformer.hpp). bf16_matmul (general plans): XLA's default precision on a TPU of the
// BERT and GShard era, fp32 everywhere except the matrix unit, which rounds each matmul's fp32
// operands to bf16 as it reads them (one pass, fp32 accumulation).
enum class PrecisionPolicy { fp32, mixed, fp16, bf16, apex_o1, apex_o2, fp8, bf16_matmul };
const char* to_string(PrecisionPolicy p);

// The data-parallel gradient reduction: after_backward (one all-reduce of all the dense gradients
// after the last backward), overlap (in buckets of whole layers during the backward), per_tensor
// (TensorFlow 1.x's CrossShardOptimizer on a TPU: one cross_replica_sum per gradient tensor, each
// its own all-reduce, uncombined, one after another after the backward; general data-parallel
// plans of dense models only, models/plan_rules.cpp).
enum class GradSync { after_backward, overlap, per_tensor };
const char* to_string(GradSync g);

// Where the gradients are clipped by their global norm (general plans):
//   after_reduction   on the reduced gradients: Megatron-LM's optimizer step reads its fp32 main
//                     gradients for their norm (PrecisionPlan::main_grad_step); an update fused by
//                     its compiler (XLA) is charged no pass of its own
//   before_reduction  each replica clips its own local gradients before the cross-replica sum, as
//                     google-research/bert's optimization.py (tf.clip_by_global_norm, then
//                     CrossShardOptimizer's sums) and MLPerf v0.7 Google BERT's TF, TF 2 and JAX
//                     steps do; two passes over each local gradient (models/transformer.cpp
//                     local_clip); data-parallel plans of dense models only (models/plan_rules.cpp)
enum class GradClip { after_reduction, before_reduction };
const char* to_string(GradClip c);

// The update rule (general plans; models/transformer.cpp costs its passes):
//   adam       Adam / AdamW: one fused pass (12 flops, 28 bytes per fp32 parameter), two fp32 moments
//   lamb       LAMB (You et al., arXiv 1904.00962, Algorithm 2): Adam's moments writing the update u,
//              then per layer the two norms ||w|| and ||u|| and the trust-ratio step w -= lr r u
//   adafactor  Adafactor as GShard's Lingvo example sets it (XLAShardingAdafactor: beta1 0, factored,
//              multiply_by_parameter_scale, clipping_threshold 1; Shazeer & Stern, arXiv 1804.04235,
//              Algorithm 4): row and column means of g^2, the update's and the weights' RMS, the step
// Under weight-update sharding LAMB's per-tensor norms are all-reduced over the shards (one
// combined all-reduce, models/transformer.cpp optimizer_step); Adafactor's row and column means
// would need reductions of their own and are refused with it (models/plan_rules.cpp).
enum class Optimizer { adam, lamb, adafactor };
const char* to_string(Optimizer o);

struct TrainingSpec {
  int seq_len = 0;
  int micro_batch_per_node = 0;  // sequences per node per micro-batch
  int micro_batches = 1;         // per step (gradient accumulation)
  PrecisionPolicy precision = PrecisionPolicy::fp32;
  GradSync grad_sync = GradSync::after_backward;
  GradClip grad_clip = GradClip::after_reduction;
  Optimizer optimizer = Optimizer::adam;
  // The attention scores' and softmax's precision (general plans): the activations' (activation),
  // or fp32 where the activations are 16-bit, as Lingvo's GShard builders set it
  // (attention_logits_dtype=tf.float32 beside fprop_dtype=tf.bfloat16, lingvo/tasks/lm/params/
  // synthetic_packed_input.py): the scores GEMM writes fp32 logits, the softmax (and the attention
  // dropout) stream 4 bytes per score, the context GEMM reads fp32 probabilities.
  enum class AttentionLogits { activation, fp32 };
  AttentionLogits attention_logits = AttentionLogits::activation;
};
inline const char* to_string(TrainingSpec::AttentionLogits a) {
  return a == TrainingSpec::AttentionLogits::fp32 ? "fp32" : "activation";
}

enum class Layout { moda, inverse };  // MoDa: replicas inside a supernode; inverse: all-to-all inside
const char* to_string(Layout l);

struct PlanSpec {
  Layout layout = Layout::moda;
  int nodes = 0;                    // nodes used (one rank per node)
  int nodes_per_supernode_used = 0; // nodes used in each supernode
  bool paro = true;                 // ParO partitioned optimizer (needs replicas > 1)
  CollectiveAlgorithm all_to_all = CollectiveAlgorithm::pairwise;
};

}  // namespace exasim
