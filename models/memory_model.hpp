// Per-device (per-GPU) memory of a dense or MoE transformer under a general parallel plan:
// model states (parameters, gradients, optimizer state) by ZeRO stage, activations by
// recomputation mode and pipeline schedule, the embedding and logits buffers, and the
// communication buffers. Bytes throughout; GB in messages are 1e9 bytes (not GiB).
//
// Model states (Rajbhandari et al., "ZeRO", SC20, §3 and Fig. 1), Ψ = the parameters this device
// holds after tensor and pipeline splitting, N = the data-parallel replicas sharing them:
//   mixed precision (fp16) Adam, K = 12 (fp32 master weights, momentum, variance):
//     stage 0: 2Ψ + 2Ψ + KΨ;  1: 2Ψ + 2Ψ + KΨ/N;  2: 2Ψ + (2 + K)Ψ/N;  3: (2 + 2 + K)Ψ/N;
//   fp32 training: 4Ψ parameters, 4Ψ gradients, 8Ψ Adam moments (K = 8, no master copy),
//     partitioned by the same stages.
//   Every precision mode takes its bytes from its row of models/precision.hpp (parameters and
//   gradients in the mode's precision, Adam's two fp32 moments, the fp32 master copy where the
//   mode keeps one; the FFN's experts and the dense parameters may differ, as in BaGuaLu's
//   layer-wise mode). ParO counts as ZeRO stage 1 (BaGuaLu §4: a ZeRO-1-like sharded optimizer)
//   when an expert has more than one replica. Experts' states are sharded over the replicas of
//   the same experts (data / expert), the dense parameters over data, or over the ranks of a
//   supernode under the hierarchical reduction (supernode_ranks). A model without a vocabulary
//   (BaGuaLu's) has no embedding.
//   offload_optimizer moves the optimizer state to host memory (host_optimizer_state_bytes).
//   fp8 (Transformer Engine) counts as bf16 mixed precision plus, in the parameters, the fp8 copy
//   of each layer weight and its transpose (2 bytes per layer parameter on the device, not
//   sharded; the embeddings and the logits stay 16-bit). Activations are counted in bf16.
//   2.5-D tensor parallelism replicates the weights on its d layers (parameter memory 1/q^2).
//
// Activations (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
// Models", 2022, §4.1, Table 2), per layer and micro-batch of b sequences of s tokens, hidden h,
// a heads, element size e (2 bytes in fp16; dropout masks 1 byte):
//   attention: QKV input e sbh, Q and K 2e sbh, softmax output e as^2b, its dropout mask as^2b,
//              the dropout output e as^2b, V e sbh, projection input e sbh, dropout mask sbh;
//   MLP:       FFN1 input e sbh, GELU input and output 2e sb d_ff, dropout mask sbh;
//   two layer norms' inputs 2e sbh.
//   Without dropout (model.dropout 0) the masks and the dropout output are not kept.
//   With e = 2 and d_ff = 4h this is Korthikanti's sbh(34 + 5as/h); fp32 (e = 4) follows the
//   same inventory. An MoE layer's GELU terms run on cf k sb rows (GShard capacity).
//   1-D tensor parallelism (t, no sequence parallelism): the layer norms' inputs, the QKV and
//   FFN1 inputs and the two sbh dropout masks stay whole (10 sbh in fp16), the rest is split by
//   t: sbh(10 + 24/t + 5as/(ht)) — Korthikanti's Eq. for tensor parallelism.
//   2-D, 2.5-D, 3-D: everything is split by the table's activation factor 1/q^2, 1/(d q^2),
//   1/q^3 (reference/models.md; Bian et al.).
//   selective recomputation drops the as^2 b terms (Korthikanti: sbh(10 + 24/t) with 1-D);
//   full recomputation keeps only the layer input, e sbh (Korthikanti's 2sbh), split like the
//   other activations (whole under 1-D without sequence parallelism).
//   Sequence parallelism (1-D): the whole part is split along the sequence too, so everything
//   is divided by t: sbh/t (34 + 5as/h); with selective recomputation 34 sbh/t; full 2sbh/t.
//   Context parallelism (c devices per sequence, ring attention on the fused kernel): each
//   device keeps the activations of its s/c tokens, so s reads s/c throughout (no s^2 term:
//   flash); ZeRO shards over the data x context replicas; the ring's buffers are in the
//   communication buffers below.
//   Working set: the layer being recomputed needs its activations again before its backward:
//   under full recomputation one layer's un-recomputed activations of one micro-batch, under
//   selective its attention core's (the as^2 b terms); counted once.
// In-flight micro-batches (how many micro-batches' activations a stage holds at its peak):
//   counted on the schedule this project runs (models/pipeline_schedule.hpp): the peak of
//   forwards done minus backwards done, in model chunks, divided by the chunks per device v.
//   GPipe: m; 1F1B: min(p - stage, m) (the first stage p); interleaved: stage 0 holds
//   min(2(p-1) + (v-1)p + 1, m v) chunks = p (1 + (p-1)/(p v)) stage-equivalents
//   (Korthikanti §4.2.3, after Narayanan et al. SC21).
// Embedding and logits (Korthikanti §4.3): the first stage keeps each in-flight micro-batch's
//   embedding output and its dropout mask, (e + 1) sbh; the last stage keeps the fp32 logits of
//   its in-flight micro-batches for the cross-entropy, 4 sbV (split by t under 1-D, by the
//   activation factor otherwise).
// Communication buffers: the largest single collective's buffer a device holds besides the
//   tensors it reads: the tensor-parallel collectives of one layer's linears (all-reduce
//   buffer, or the gathered panel under 2-D/2.5-D/3-D), the pipeline receive buffer, and under
//   ZeRO 3 one layer's gathered parameters, and under context parallelism the ring's 4 key/value
//   blocks (sent and received, and their gradients). Gradient reductions run in place on the gradient
//   buffer (Megatron's contiguous buffer, ZeRO's buckets), so they add nothing here; NCCL's own
//   internal buffers are not counted.
#pragma once
#include <optional>
#include <stdexcept>
#include <string>

#include "models/moe_spec.hpp"
#include "models/parallel_plan.hpp"

namespace exasim {

// A plan that does not fit in a device's memory.
class DoesNotFitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct DeviceMemory {
  int stage = 0;
  double parameters = 0;               // Ψ: parameters held by this device (after TP and PP splitting)
  double in_flight_micro_batches = 0;  // stage-equivalents of activations held at the peak
  double parameters_bytes = 0;
  double gradients_bytes = 0;
  double optimizer_state_bytes = 0;       // on the device (0 when offloaded)
  double host_optimizer_state_bytes = 0;  // offload_optimizer: in host memory, not in total_bytes
  double activations_bytes = 0;           // the layers' activations, incl. the recompute working set
  double layer_activations_bytes = 0;     // one layer's stored activations for one micro-batch (Korthikanti's per-layer figure)
  double embedding_logits_bytes = 0;
  double communication_buffers_bytes = 0;
  double total_bytes = 0;  // device memory: all of the above but the host's
};

// Model-state bytes per device under ZeRO (mixed-precision Adam): stage 0: (4 + K)Ψ; 1: 4Ψ + KΨ/N;
// 2: 2Ψ + (2 + K)Ψ/N; 3: (4 + K)Ψ/N. Throws std::invalid_argument for a stage outside 0..3 or N < 1.
double zero_model_state_bytes(double parameters, int data_parallel, int stage, double K = 12);

// The layers of a model chunk (virtual stage vs = chunk x p + stage, 0 .. p v - 1) and of a
// pipeline stage's device (all its chunks). Layers that do not split evenly over the p v chunks
// are spread as Llama 3 does with its 126 layers (Llama Team, arXiv 2407.21783, section 3.3.2:
// one layer fewer in the first and the last chunk, which also hold the embedding and the output
// layer): each chunk gets ceil(layers / (p v)) and the shortfall is taken one layer at a time
// from the first, the last, the second, the second-to-last chunk, and so on. first_layer_of_chunk:
// the index of the chunk's first layer.
int layers_on_chunk(int layers, const ParallelPlan& plan, int virtual_stage);
int first_layer_of_chunk(int layers, const ParallelPlan& plan, int virtual_stage);
int layers_on_stage(int layers, const ParallelPlan& plan, int stage);

// Stage-equivalent micro-batches whose activations stage `stage` holds at its peak (see above).
double in_flight_micro_batches(const ParallelPlan& plan, int stage);

// Bytes of one layer's stored activations for one micro-batch (without the working set).
double layer_activation_bytes(const ModelSpec& model, const TrainingSpec& training, const ParallelPlan& plan);

// Throws std::invalid_argument when the plan cannot be laid out (see tensor_layout), its schedule
// cannot run (see pipeline_order) or the stage is out of range.
DeviceMemory device_memory(const ModelSpec& model, const TrainingSpec& training, const ParallelPlan& plan, int stage);

// Bytes of a checkpoint of the whole model: every parameter once, its working copy and its
// optimizer state (Adam's two fp32 moments and the fp32 master copy where the precision mode keeps
// one; the experts' row for expert_parameters, the gates' for gate_parameters (the experts' where
// the mode runs the gate with the FFN, else the shared row), the shared row for the rest), as
// device_memory counts them per device before ZeRO partitioning (no moments under Adafactor, as
// there). Gradients are not saved.
double checkpoint_state_bytes(PrecisionPolicy precision, double parameters, double expert_parameters,
                              double gate_parameters, Optimizer optimizer = Optimizer::adam);

// The largest-total stage.
DeviceMemory worst_stage_memory(const ModelSpec& model, const TrainingSpec& training, const ParallelPlan& plan);

// "needs 97.3 GB per GPU, has 80.0 GB" (GB = 1e9 bytes) when m.total_bytes exceeds the device's
// memory; nothing when it fits.
std::optional<std::string> memory_shortfall(const DeviceMemory& m, double device_memory_bytes,
                                            const std::string& device_word);

}  // namespace exasim
