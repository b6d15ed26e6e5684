// The transformer families in one layer vocabulary (models/moe_spec.hpp): encoder-only (BERT and
// its pre-training heads), encoder-decoder (cross-attention), dense or MoE per layer with a
// stride. Parameters against the papers' counts, FLOPs by hand; no simulation here.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <variant>

#include "models/transformer.hpp"
#include "models/transformer_parameters.hpp"
#include "tests/unit/approx.hpp"
#include "tests/unit/fixtures.hpp"
#include "tests/unit/small_scenario.hpp"

using namespace exasim;

namespace {

// T5-style encoder-decoder with an MoE layer every other layer (Switch, GShard).
ModelSpec encoder_decoder_moe(int layers, int d, int heads, int ff, int vocab, int experts, int k) {
  ModelSpec m = test::gpt("", layers, d, heads, ff, vocab);
  m.architecture = ModelSpec::Architecture::encoder_decoder;
  m.decoder_layers = layers;
  m.experts_per_layer = experts;
  m.top_k = k;
  m.moe_every = 2;
  return m;
}

TrainingSpec half(int seq) { return test::training(seq, PrecisionPolicy::bf16); }

ParallelPlan one_device(int micro_batch) {
  ParallelPlan p;
  p.micro_batch = micro_batch;
  p.global_batch = micro_batch;
  return p;
}

// A dense layer then an MoE layer: d 64, 4 heads, d_ff 256, 8 experts, top-2, capacity factor 1.
ModelSpec moe_layer_pair() {
  ModelSpec m = test::gpt("", 2, 64, 4, 256, 0);
  m.experts_per_layer = 8;
  m.top_k = 2;
  m.capacity_factor = 1.0;
  m.moe_every = 2;
  return m;
}

int count_label(const StepGraph& g, const std::string& label) {
  int n = 0;
  for (OpId v = 0; v < boost::num_vertices(g); ++v) n += g[v].label == label;
  return n;
}

OpId find_label(const StepGraph& g, const std::string& label) {
  for (OpId v = 0; v < boost::num_vertices(g); ++v)
    if (g[v].label == label) return v;
  FAIL("no op labelled " << label);
  return 0;
}

}  // namespace

TEST_CASE("BERT-Large: 336,226,108 parameters (the paper's 340M) and its FLOPs by hand") {
  const ModelSpec m = test::bert_large();
  const double d = 1024, ff = 4096, V = 30522, s = 512, L = 24;
  // per layer: attention 4 d^2 + 4 d, two layer norms 4 d, FFN 2 d ff + ff + d; embeddings (V + s + 2) d
  // and their layer norm 2 d; pooler d^2 + d and NSP classifier 2 d + 2; MLM transform d^2 + d, layer
  // norm 2 d, output bias V
  const double by_hand = L * (4 * d * d + 8 * d + 2 * d * ff + ff + d) + (V + s + 2) * d + 2 * d + (d * d + d) +
                         (2 * d + 2) + (d * d + d + 2 * d + V);
  // (Hugging Face's BertModel for bert-large counts 335,141,888 with the pooler; the pre-training heads add
  // the MLM transform, its layer norm and output bias, 1,082,170, and the NSP classifier, 2,050.)
  CHECK(by_hand == 336226108);
  CHECK(transformer_parameters(m, s) == by_hand);
  const TransformerWorkload tw = build_transformer_workload(m, half(512), one_device(2));
  CHECK(tw.parameters == by_hand);
  // forward GEMMs: per layer QKV, projection, FFN (2 T d (4 d + 2 ff)) and the attention core (4 b s^2 d);
  // the heads: NSP pooler and classifier on b first tokens, the MLM transform and logits on the
  // b x ceil(0.15 s) = 2 x 77 masked tokens; backward twice the forward
  const double b = 2, T = b * s, Tm = b * 77;
  const double forward = L * (2 * T * d * (4 * d + 2 * ff) + 4 * b * s * s * d) + 2 * b * d * d + 2 * b * 2 * d +
                         2 * Tm * d * d + 2 * Tm * V * d;
  CHECK(tw.model_flops == test::rel(3 * forward, 1e-12));
  const StepGraph& g = tw.workload.programs[0];
  CHECK(count_label(g, "final_layernorm") == 0);  // post-LN: no final layer norm
  CHECK(count_label(g, "mlm_transform") == 1);
  CHECK(count_label(g, "nsp_pooler") == 1);
  CHECK(count_label(g, "cross_q") == 0);
}

TEST_CASE("Switch-Base (128 experts, an MoE layer every other layer): the paper's 7.4B parameters") {
  const ModelSpec m = encoder_decoder_moe(12, 768, 12, 3072, 32128, 128, 1);
  const double d = 768, ff = 3072, E = 128, s = 512;
  const double attn = 4 * d * d + 8 * d, cross = 4 * d * d + 6 * d, ffn = 2 * d * ff + ff + d;
  // 12 encoder and 12 decoder layers, 6 of each MoE (E experts and the gate d E)
  const double by_hand = 24 * attn + 12 * cross + 12 * ffn + 12 * (E * ffn + d * E) + (32128 + s) * d;
  CHECK(transformer_parameters(m, s) == by_hand);
  CHECK(by_hand / 7.4e9 == test::rel(1, 0.01));
  CHECK(m.is_moe_layer(1));
  CHECK_FALSE(m.is_moe_layer(12));  // the decoder's first layer
  CHECK(m.is_moe_layer(13));
}

TEST_CASE("GShard's 600B model: 2,048 experts, 36 layers (18 MoE), d 1024, d_ff 8192") {
  const ModelSpec m = encoder_decoder_moe(18, 1024, 16, 8192, 32000, 2048, 2);
  const double p = transformer_parameters(m, 1024);
  const double experts = 18 * 2048 * (2.0 * 1024 * 8192 + 8192 + 1024);
  CHECK(p > experts);
  CHECK(p - experts < 1.5e9);  // attention, gates and the embedding are 1 to 2 B
  CHECK(p / 600e9 == test::rel(1, 0.04));  // the paper's rounded 600B
}

TEST_CASE("a GShard MoE layer pair: a dense layer then an MoE layer, top-2 on capacity") {
  const ModelSpec m = moe_layer_pair();
  const TransformerWorkload tw = build_transformer_workload(m, half(32), one_device(4));
  const double d = 64, ff = 256, E = 8, T = 4 * 32, s = 32, b = 4;
  const double attn = 4 * d * d + 8 * d, ffn = 2 * d * ff + ff + d;
  CHECK(tw.parameters == 2 * attn + ffn + E * ffn + d * E);  // (no vocabulary: no embedding)
  // forward GEMMs: two attentions; the dense FFN on T rows; the MoE layer's fp32 gate T x E x d and
  // its experts on the capacity's padded rows, capacity_factor x T x top_k
  const double attention = 2 * T * d * 4 * d + 4 * b * s * s * d;
  const double forward = 2 * attention + 2 * T * d * 2 * ff + 2 * T * E * d + 2 * (1.0 * T * 2) * d * 2 * ff;
  CHECK(tw.model_flops == test::rel(3 * forward, 1e-12));
  const StepGraph& g = tw.workload.programs[0];
  CHECK(count_label(g, "ffn1") == 1);
  CHECK(count_label(g, "expert_ffn1") == 1);
}

// GShard's groups (Lepikhin et al. 2020, Algorithm 1): the pair above with its 128 tokens in 4 groups
// of S = 32; capacity C = 2 S / E = 8 per group and expert, so E C = 64 = 2 S padded rows a group.
TEST_CASE("a GShard MoE layer pair in groups: the dispatch and combine einsums by hand") {
  ModelSpec m = moe_layer_pair();
  const TransformerWorkload flat = build_transformer_workload(m, half(32), one_device(4));
  m.group_size = 32;
  CHECK(m.group_capacity() == 8);
  const TransformerWorkload grouped = build_transformer_workload(m, half(32), one_device(4));
  const double d = 64, T = 128, S = 32, G = T / S, EC = 8 * 8;
  // the experts still compute E C / S = 2 rows a token: the model's FLOPs do not move
  CHECK(grouped.model_flops == test::rel(flat.model_flops, 1e-12));
  // dispatch GSEC,GSM->EGCM and combine EGCM,GSEC->GSM forward (2), the combine's two gradients and
  // the dispatch's one (the mask has none): 5 GEMMs of G x S x E C x d, 2 FLOPs a multiply-add; the
  // permutations they replace had no FLOPs; and Lingvo's gating between the softmax and the masks
  // (gate_positions): 6 k operations on each of the T E gate elements, k = 2, E = 8
  const double einsum = 2 * G * S * EC * d, gating = 6 * 2 * T * 8;
  CHECK(grouped.executed_flops - flat.executed_flops == test::rel(5 * einsum + gating, 1e-12));
  const StepGraph& g = grouped.workload.programs[0];
  CHECK(count_label(g, "dispatch_einsum") == 1);
  CHECK(count_label(g, "combine_einsum") == 1);
  CHECK(count_label(g, "dispatch_permute") == 0);
  for (OpId v = 0; v < boost::num_vertices(g); ++v)
    if (g[v].label == "dispatch_einsum") {
      const auto& c = std::get<ComputeWork>(g[v].work);
      CHECK(c.shape.dims[0] == EC);  // E C x d x S, one product per group
      CHECK(c.shape.dims[1] == d);
      CHECK(c.shape.dims[2] == S);
      CHECK(c.shape.batch == G);
    }
  // over two expert-parallel devices the all-to-alls carry [E, G C, d] in bf16: E G C = 2 T rows
  ParallelPlan two = one_device(4);
  two.data = 2;
  two.expert = 2;
  two.global_batch = 8;
  const TransformerWorkload split = build_transformer_workload(m, half(32), two);
  const StepGraph& g2 = split.workload.programs[0];
  CHECK(std::get<CollectiveWork>(g2[find_label(g2, "dispatch")].work).bytes == 8 * G * 8 * d * 2);
}

TEST_CASE("GShard's groups: a small group rounds the capacity up to a whole row, and must divide the tokens") {
  ModelSpec m = moe_layer_pair();
  m.group_size = 2;  // 2 S / E = 0.5: one row a group and expert, E C / S = 4 rows a token
  CHECK(m.group_capacity() == 1);
  CHECK(m.padded_slots_per_token() == 4);
  const TransformerWorkload tw = build_transformer_workload(m, half(32), one_device(4));
  const StepGraph& g = tw.workload.programs[0];
  const auto& ffn1 = std::get<ComputeWork>(g[find_label(g, "expert_ffn1")].work);
  CHECK(double(ffn1.shape.dims[0]) * double(ffn1.shape.batch) == 4 * 128);  // the padded rows, all experts
  m.group_size = 48;  // 128 tokens are not whole groups of 48
  CHECK_THROWS_WITH_AS(build_transformer_workload(m, half(32), one_device(4)), doctest::Contains("group_size"),
                       std::invalid_argument);
  m.group_size = 128;  // one group: whole, but not one on each of two cores
  CHECK_NOTHROW(build_transformer_workload(m, half(32), one_device(4), 1));
  CHECK_THROWS_AS(build_transformer_workload(m, half(32), one_device(4), 2), std::invalid_argument);
}

// Lingvo's rule (lingvo/core/gshard_layers.py Top2GatingOnLogits): int(S cf / E), without top_k,
// rounded up to a multiple of 4 where it exceeds expert_capacity_dim (1 when unset, as praxis).
TEST_CASE("GShard's capacity under Lingvo's rule: int(S cf / E) rounded up to a multiple of 4") {
  ModelSpec m;
  m.experts_per_layer = 2048;
  m.top_k = 2;
  m.capacity_factor = 1;
  m.group_size = 2048;
  CHECK(m.group_capacity() == 2);  // the ceil rule: cf k S / E = 1 x 2 x 2048 / 2048
  m.capacity_rule = ModelSpec::CapacityRule::lingvo;
  m.capacity_factor = 2;  // the paper's 2 S / E, top_k being outside Lingvo's formula
  CHECK(m.group_capacity() == 4);  // int(2048 x 2 / 2048) = 2, rounded up to 4
  m.experts_per_layer = 512;
  CHECK(m.group_capacity() == 8);  // int(8), already a multiple of 4
  m.experts_per_layer = 128;
  CHECK(m.group_capacity() == 32);  // int(32)
  CHECK(m.padded_slots_per_token() == 2);  // E C / S = 128 x 32 / 2048
  m.experts_per_layer = 2048;
  m.capacity_factor = 1;
  CHECK(m.group_capacity() == 1);  // int(1) does not exceed expert_capacity_dim 1: C stays 1
  m.capacity_factor = 3.9;
  CHECK(m.group_capacity() == 4);  // int(3.9) = 3, rounded up to 4
  m.experts_per_layer = 16;
  m.group_size = 128;
  m.capacity_factor = 1.25;
  CHECK(m.group_capacity() == 12);  // int(10) -> 12
  m.capacity_rule = ModelSpec::CapacityRule::ceil;
  CHECK(m.group_capacity() == 20);  // ceil(1.25 x 2 x 128 / 16)
}

TEST_CASE("capacity_rule: read for a grouped MoE model, refused without group_size or with an unknown rule") {
  nlohmann::json j = test::small_gpt_on("tpu-v3-pod");
  j["model"] = {{"name", "moe"}, {"layers", 2}, {"d_model", 256}, {"heads", 4}, {"d_ff", 1024}, {"vocab", 1024},
                {"experts_per_layer", 16}, {"top_k", 2}, {"capacity_factor", 1.25}, {"moe_every", 2},
                {"group_size", 128}, {"capacity_rule", "lingvo"}};
  j["plan"] = {{"data_parallel", 16}, {"expert_parallel", 16}, {"micro_batch", 2}, {"global_batch", 32},
               {"slice", {4, 4}}};
  const Scenario sc = parse_scenario(j.dump(), "t.json");
  CHECK(sc.model.capacity_rule == ModelSpec::CapacityRule::lingvo);
  CHECK(sc.model.group_capacity() == 12);
  nlohmann::json bad = j;
  bad["model"]["capacity_rule"] = "floor";
  CHECK(test::refusal(bad).first == "/model/capacity_rule");
  bad = j;
  bad["model"].erase("group_size");
  const auto [path, expected] = test::refusal(bad);
  CHECK(path == "/model/capacity_rule");
  CHECK(expected.find("group_size") != std::string::npos);
}

// Lingvo's gating between the softmax and the [G, S, E, C] tensors: per choice, 6 reads of the
// T x E gates or positions and the cumsum's write, in the activations' storage (bf16: 2 bytes).
TEST_CASE("GShard's groups: the gating's position passes by hand") {
  ModelSpec m = moe_layer_pair();
  m.group_size = 32;
  const TransformerWorkload tw = build_transformer_workload(m, half(32), one_device(4));
  const StepGraph& g = tw.workload.programs[0];
  CHECK(count_label(g, "gate_positions") == 1);
  const auto& c = std::get<ComputeWork>(g[find_label(g, "gate_positions")].work);
  const double T = 128, E = 8;
  CHECK(c.bytes == test::rel(2 * 7 * T * E * 2, 1e-12));
  CHECK(c.flops == test::rel(2 * 6 * T * E, 1e-12));
  m.group_size = 0;  // ungrouped: a gather, no one-hot masks
  const TransformerWorkload flat = build_transformer_workload(m, half(32), one_device(4));
  CHECK(count_label(flat.workload.programs[0], "gate_positions") == 0);
}

TEST_CASE("encoder-decoder: each decoder layer adds cross-attention over the encoder's output") {
  ModelSpec m;
  m.architecture = ModelSpec::Architecture::encoder_decoder;
  m.layers = 2;
  m.decoder_layers = 3;
  m.d_model = 64;
  m.heads = 4;
  m.d_ff = 256;
  m.vocab = 128;
  const TransformerWorkload tw = build_transformer_workload(m, half(16), one_device(2));
  const StepGraph& g = tw.workload.programs[0];
  CHECK(count_label(g, "cross_q") == 3);
  CHECK(count_label(g, "cross_kv") == 3);
  CHECK(count_label(g, "cross_scores") == 3);
  CHECK(count_label(g, "attn_scores") == 5);
  CHECK(count_label(g, "embedding") == 2);  // the encoder's and the decoder's inputs
  const double d = 64, ff = 256, T = 32, b = 2, s = 16, V = 128;
  const double self = 2 * T * d * 4 * d + 4 * b * s * s * d, ffn = 2 * T * d * 2 * ff;
  const double forward = 5 * (self + ffn) + 3 * self + 2 * T * V * d;  // cross-attention costs as self-attention here
  CHECK(tw.model_flops == test::rel(3 * forward, 1e-12));
  CHECK(tw.parameters == transformer_parameters(m, 16));
  ParallelPlan staged = one_device(2);
  staged.pipeline = 2;
  staged.global_batch = 4;
  CHECK_THROWS_AS(build_transformer_workload(m, half(16), staged), std::invalid_argument);
}

TEST_CASE("a device's cores split the token GEMMs, same FLOPs") {
  const ModelSpec m = test::bert_large();
  ModelSpec small = m;
  small.layers = 2;
  const TransformerWorkload one = build_transformer_workload(small, half(128), one_device(4), 1);
  const TransformerWorkload two = build_transformer_workload(small, half(128), one_device(4), 2);
  CHECK(one.model_flops == test::rel(two.model_flops, 1e-12));
  const StepGraph& g = two.workload.programs[0];
  bool seen = false;
  for (OpId v = 0; v < boost::num_vertices(g); ++v)
    if (g[v].label == "ffn1") {
      const auto& c = std::get<ComputeWork>(g[v].work);
      CHECK(c.shape.dims[0] == 4 * 128 / 2);
      CHECK(c.shape.batch == 2);
      seen = true;
    }
  CHECK(seen);
}

TEST_CASE("BERT's one-hot embedding on a TPU: a tokens x vocab x d GEMM forward, the table's gradient backward") {
  // google-research/bert's embedding_lookup with use_one_hot_embeddings: one-hot[T x V] x table[V x d]
  // forward; backward only the table's gradient one-hot^T[V x T] x dOut[T x d] (the one-hot has no
  // gradient). Executed FLOPs grow by 2 T V d twice; the model FLOPs do not change.
  ModelSpec m = test::bert_large();
  const TransformerWorkload gather = build_transformer_workload(m, half(128), one_device(4));
  m.embedding_lookup = ModelSpec::EmbeddingLookup::one_hot_matmul;
  const TransformerWorkload one_hot = build_transformer_workload(m, half(128), one_device(4));
  const double T = 4 * 128, V = 30522, d = 1024;
  CHECK(one_hot.model_flops == gather.model_flops);
  // the gather's forward and backward are memory-bound copies without FLOPs
  CHECK(one_hot.executed_flops - gather.executed_flops == test::rel(2 * (2 * T * V * d), 1e-12));
  const StepGraph& g = one_hot.workload.programs[0];
  CHECK(count_label(g, "embedding") == 1);
  CHECK(count_label(g, "embedding.wgrad") == 1);
  CHECK(count_label(g, "embedding.bwd") == 0);
  const auto& fwd = std::get<ComputeWork>(g[find_label(g, "embedding")].work);
  CHECK(fwd.kernel == Kernel::gemm);
  CHECK(fwd.flops == test::rel(2 * T * V * d));
}

TEST_CASE("LAMB under weight-update sharding: the per-tensor norms' partial sums all-reduced, 2 fp32 per tensor") {
  // BERT-Large's norm groups: 24 layers x (8 attention weights and biases, 4 layer-norm scales and
  // shifts, 4 FFN weights and biases) + 14 outside the layers (3 embeddings and their layer norm's 2,
  // the MLM transform's 2, its layer norm's 2 and the output bias, the pooler's 2, the NSP
  // classifier's 2) = 398
  const ModelSpec m = test::bert_large();
  CHECK(lamb_norm_groups(m) == 24 * 16 + 14);
  TrainingSpec t = half(128);
  t.optimizer = Optimizer::lamb;
  ParallelPlan p = one_device(8);
  p.data = 4;
  p.global_batch = 32;
  p.zero_stage = 1;
  const TransformerWorkload sharded = build_transformer_workload(m, t, p);  // (bf16: Megatron's passes around it)
  const StepGraph& g = sharded.workload.programs[0];
  REQUIRE(count_label(g, "dense_adam.lamb_norm_all_reduce") == 1);
  const auto& c = std::get<CollectiveWork>(g[find_label(g, "dense_adam.lamb_norm_all_reduce")].work);
  CHECK(c.kind == CollectiveKind::all_reduce);
  CHECK(c.bytes == 2 * 4 * 398);
  p.zero_stage = 0;  // every replica updates whole tensors: no reduction of the norms
  const TransformerWorkload whole = build_transformer_workload(m, t, p);
  CHECK(count_label(whole.workload.programs[0], "dense_adam.lamb_norm_all_reduce") == 0);
}

TEST_CASE("fp32 attention logits under 16-bit activations (Lingvo's attention_logits_dtype): the softmax streams 4 bytes a score") {
  // the softmax reads the logits and writes the probabilities (2 x 4 bytes a score forward; its
  // backward reads the probabilities and their gradient and writes the logits' gradient, 3 x 4)
  ModelSpec m = test::bert_large();
  m.layers = 1;
  TrainingSpec t = half(128);
  const TransformerWorkload half_scores = build_transformer_workload(m, t, one_device(2));
  t.attention_logits = TrainingSpec::AttentionLogits::fp32;
  const TransformerWorkload fp32_scores = build_transformer_workload(m, t, one_device(2));
  const double scores = 2 * 16 * 128.0 * 128;  // sequences x heads x s x s
  const auto bytes = [](const TransformerWorkload& w, const std::string& label) {
    const StepGraph& g = w.workload.programs[0];
    return std::get<ComputeWork>(g[find_label(g, label)].work).bytes;
  };
  CHECK(bytes(half_scores, "attn_softmax") == 2 * 2 * scores);
  CHECK(bytes(fp32_scores, "attn_softmax") == 2 * 4 * scores);
  CHECK(bytes(fp32_scores, "attn_softmax.bwd") == 3 * 4 * scores);
  CHECK(fp32_scores.model_flops == half_scores.model_flops);
}
