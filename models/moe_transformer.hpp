// BaGuaLu's MoDa models (every layer an MoE layer) as a per-rank step graph: for each
// micro-batch, forward through the layers (attention, gate, all-to-all dispatch, expert FFN,
// all-to-all combine), backward in reverse; then the gradient reduction and optimizer
// (ParO: reduce-scatter, Adam on a shard, all-gather; without it, Adam on everything).
// Routing is SWIPE-balanced: every expert receives exactly its capacity.
#pragma once
#include <stdexcept>
#include <string>

#include "models/moda_placement.hpp"
#include "models/moe_spec.hpp"
#include "sim/workload.hpp"

namespace exasim {

// A plan whose model does not fit in a node's memory.
class DoesNotFitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MemoryPerNode {
  double parameters_bytes = 0;
  double gradients_bytes = 0;
  double optimizer_state_bytes = 0;
  double activations_bytes = 0;
  double total_bytes() const { return parameters_bytes + gradients_bytes + optimizer_state_bytes + activations_bytes; }
};

struct MoeWorkload {
  Workload workload;
  Placement placement;
  double executed_flops_per_rank = 0;  // every compute op of the step, as counters would count
  double model_flops_per_rank = 0;     // the forward and backward GEMMs alone
  double tokens_per_step = 0;          // all ranks
  double parameters = 0;               // the whole model
  MemoryPerNode memory;
};

// Throws DoesNotFitError when the step needs more than `memory_bytes_per_node`.
MoeWorkload build_moe_workload(const ModelSpec& model, const TrainingSpec& training, const PlanSpec& plan,
                               int machine_nodes_per_supernode, double memory_bytes_per_node);

}  // namespace exasim
