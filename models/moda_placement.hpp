// Where each rank sits and which groups it belongs to, for BaGuaLu's MoDa layout and its
// inverse. One rank per node. Ranks fill `nodes_per_supernode_used` nodes of each supernode.
//
// With E experts per layer and R = ranks / E replicas of each expert:
//  * MoDa:    rank r holds expert r / R as replica r % R: the R replicas of an expert are
//             contiguous (inside one supernode when R divides the supernode), and each MoE
//             (all-to-all) group takes one replica of every expert, across supernodes.
//  * inverse: rank r holds expert r % E as replica r / E: each MoE group is contiguous
//             (inside a supernode) and an expert's replicas sit across supernodes.
//
// Group roles: "moe" (all-to-all of tokens), "expert_replicas" (expert gradients and ParO),
// "supernode" (ranks of one supernode), "across_supernodes" (same position in every supernode).
#pragma once
#include "models/moe_spec.hpp"
#include "sim/workload.hpp"

namespace exasim {

struct Placement {
  int ranks = 0;
  int experts = 0;
  int replicas = 0;
  int supernodes_used = 0;
  int nodes_per_supernode_used = 0;
};

// Fills w.rank_count, node_of_rank, class_of_rank and the four group tables.
Placement place_moe_ranks(const ModelSpec& model, const PlanSpec& plan, int machine_nodes_per_supernode, Workload& w);

}  // namespace exasim
