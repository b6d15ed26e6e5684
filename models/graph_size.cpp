#include "models/graph_size.hpp"

namespace exasim {

namespace {

// Upper bounds of the ops the builders append, checked against built graphs of dense, MoE,
// tensor-parallel, recomputed and interleaved plans by tests/unit/graph_size_test.cpp:
// per layer and pipeline pass (one micro-batch's forward or backward through one layer, its
// collectives and, under full recomputation, the forward run again), per layer for the gradient
// reduction and update, and per program for the embedding, logits, transfers and optimizer.
constexpr double kOpsPerLayerPass = 64;
constexpr double kOpsPerLayerUpdate = 16;
constexpr double kOpsPerPassFixed = 32;
constexpr double kOpsPerProgramFixed = 64;
// Context parallelism (ring attention): per layer pass and ring step, an attention block and its
// key/value send and receive (and, backward, the key/value gradients' send and receive).
constexpr double kOpsPerContextStep = 8;
// All-gather context parallelism (Llama 3): per layer pass, the keys and values' all-gather, two
// attention kernels and, backward, the gradients' reduce-scatter, whatever the group's size.
constexpr double kOpsPerGatheredContext = 8;

}  // namespace

GraphSizeEstimate estimate_graph_size(const ModelSpec& m, const TrainingSpec& t, const ParallelPlan& plan) {
  (void)t;
  GraphSizeEstimate e;
  if (m.is_convnet()) {  // models/convnet.hpp: at most 9 layers a residual block (with its projection),
    double blocks = 0;   // at most 10 ops a layer forward and backward (with distributed batch norm)
    for (int b : m.convnet.stage_blocks) blocks += b;
    e.ops_per_rank = (blocks * 9 + 8) * 10 + kOpsPerProgramFixed;
    e.ranks = plan.data;
    return e;
  }
  const double pipeline = plan.pipeline, chunks = plan.virtual_stages;
  const double layers_per_device = (double(m.layers) + 2.0 * m.decoder_layers) / pipeline;  // (a decoder layer: two attentions)
  const double micro_batches = double(plan.global_batch) / (double(plan.micro_batch) * plan.data);
  const double passes = 2 * micro_batches * chunks;  // each micro-batch's forward and backward of each chunk
  const bool gathered = plan.context > 1 && plan.context_algorithm == ParallelPlan::ContextParallelAlgorithm::all_gather;
  const double layer_pass =
      kOpsPerLayerPass + (gathered ? kOpsPerGatheredContext : kOpsPerContextStep * (double(plan.context) - 1));
  e.ops_per_rank = passes * (layers_per_device / chunks * layer_pass + kOpsPerPassFixed) +
                   layers_per_device * kOpsPerLayerUpdate + kOpsPerProgramFixed;
  e.ranks = double(plan.data) * plan.tensor * plan.pipeline * plan.context;
  return e;
}

GraphSizeEstimate estimate_graph_size(const ModelSpec& m, const TrainingSpec& t, const PlanSpec& plan) {
  GraphSizeEstimate e;
  const double passes = 2.0 * t.micro_batches;
  e.ops_per_rank = passes * (double(m.layers) * kOpsPerLayerPass + kOpsPerPassFixed) +
                   double(m.layers) * kOpsPerLayerUpdate + kOpsPerProgramFixed;
  e.ranks = plan.nodes;
  return e;
}

}  // namespace exasim
