// BaGuaLu's MoDa layout and its inverse as placements of the general plan (models/parallel_plan.hpp):
// expert parallelism over all E experts of a layer, data parallelism over the R = ranks / E
// replicas of each expert, ParO as the plan's sharded optimizer over each expert's replicas and,
// for the shared (attention, gate, norm) parameters, over the ranks of a supernode, whose
// gradients are reduced hierarchically (supernode_ranks). The step is built by the one transformer
// builder (models/transformer.cpp) with its memory model; this file only chooses the plan and
// where each rank sits. One rank per node; ranks fill `nodes_per_supernode_used` nodes of each
// supernode.
//
//  * MoDa:    rank r holds expert r / R as replica r % R: the R replicas of an expert are
//             contiguous (inside one supernode when R divides the supernode), and each MoE
//             (all-to-all, "ep") group takes one replica of every expert, across supernodes.
//             In the plan's placement, "expert" is listed after "data".
//  * inverse: rank r holds expert r % E as replica r / E: each MoE group is contiguous
//             (inside a supernode) and an expert's replicas ("expert_dp") sit across supernodes.
//             "expert" is listed before "data".
#pragma once
#include "models/moe_spec.hpp"
#include "models/parallel_plan.hpp"
#include "models/transformer.hpp"
#include "sim/workload.hpp"

namespace exasim {

struct Placement {
  int ranks = 0;
  int experts = 0;
  int replicas = 0;
  int supernodes_used = 0;
  int nodes_per_supernode_used = 0;
};

// The general plan of a MoDa scenario's plan. Throws std::invalid_argument when the ranks are not a
// multiple of the experts or do not fill whole supernodes.
ParallelPlan moda_parallel_plan(const ModelSpec& model, const TrainingSpec& training, const PlanSpec& plan);

// Puts the ranks of a workload built from moda_parallel_plan onto the machine's nodes (supernode
// by supernode), sets the classes of ranks that behave alike and each group's supernode blocks.
Placement place_in_supernodes(const ModelSpec& model, const PlanSpec& plan, int machine_nodes_per_supernode,
                              Workload& w);

struct ModaWorkload {
  TransformerWorkload step;
  Placement placement;
};
// The general plan, built by build_transformer_workload, placed in supernodes.
ModaWorkload build_moda_workload(const ModelSpec& model, const TrainingSpec& training, const PlanSpec& plan,
                                 int machine_nodes_per_supernode);

}  // namespace exasim
