// Where each rank of a general parallel plan sits, and its groups. One rank per device;
// rank r runs on device r, and devices are numbered so that consecutive devices share the
// machine's innermost level (a node's GPUs, then a leaf switch...).
//
// The plan's placement lists the parallel dimensions innermost first: with Megatron-LM's
// order {tensor, data, pipeline}, rank = t + T (d + D p): a tensor-parallel group is T adjacent
// devices (inside a node), a pipeline group is strided by T D.
//
// Group roles: "dp" (same tensor index and stage: gradient reduction, over data x context
// ranks), "cp" (same tensor, data index and stage: the context-parallel ring), "pp" (same
// tensor, context and data index: member i is stage i), "ep" (expert parallelism: `expert` consecutive data-parallel
// replicas that exchange tokens) and "expert_dp" (the replicas holding the same experts), and
// "supernode" and "across_supernodes" (ParallelPlan::supernode_ranks: blocks of each "dp" group and
// the members at one position of every block), and the tensor-parallel roles of the plan's tensor mode
// (see models/tensor_parallel.hpp; "tp" for 1-D).
#pragma once
#include <array>
#include <vector>

#include "models/parallel_plan.hpp"
#include "sim/workload.hpp"

namespace exasim {

struct RankCoords {
  int tensor = 0, data = 0, pipeline = 0, context = 0;
};

struct PlanPlacement {
  std::vector<RankCoords> coords;  // per rank
  // Rank of the given coordinates under the plan's placement.
  int rank_of(const RankCoords& c) const;
  std::array<int, 4> sizes{};    // tensor, data, pipeline, context
  std::array<int, 4> strides{};  // rank stride of each dimension
};

// Fills w.rank_count, node_of_rank (= rank), program_of_rank (= stage), class_of_rank
// (= stage: the ranks of one stage behave alike) and the group tables. Throws
// std::invalid_argument when the placement does not list tensor, data and pipeline once each
// (context at most once; unlisted, it sits just outside tensor, Megatron-Core's order).
PlanPlacement place_plan(const ParallelPlan& plan, Workload& w);

}  // namespace exasim
