#include "models/moda_placement.hpp"

#include <stdexcept>

namespace exasim {

namespace {
// The largest L such that, in every group, each run of L consecutive members sits in one
// supernode and the runs sit in distinct supernodes (1 when the layout has no such blocks).
int supernode_block_size(const GroupTable& t, int K) {
  const auto& g0 = t.members.at(0);
  int L = 1;
  while (L < static_cast<int>(g0.size()) && g0[L] / K == g0[0] / K) ++L;
  for (const auto& members : t.members) {
    if (members.size() % L != 0) return 1;
    for (size_t b = 0; b * L < members.size(); ++b)
      for (int i = 0; i < L; ++i)
        if (members[b * L + i] / K != members[b * L] / K || (b > 0 && members[b * L] / K == members[(b - 1) * L] / K))
          return 1;
  }
  return L;
}
}  // namespace

ParallelPlan moda_parallel_plan(const ModelSpec& m, const TrainingSpec& t, const PlanSpec& s) {
  const int E = m.experts_per_layer;
  if (E <= 0 || s.nodes % E != 0) throw std::invalid_argument("ranks must be a multiple of the experts per layer");
  if (s.nodes_per_supernode_used <= 0 || s.nodes % s.nodes_per_supernode_used != 0)
    throw std::invalid_argument("ranks must fill whole supernodes");
  ParallelPlan p;
  p.data = s.nodes;
  p.expert = E;
  p.paro = s.paro;
  p.supernode_ranks = s.nodes_per_supernode_used;
  p.all_to_all = s.all_to_all;
  p.micro_batch = t.micro_batch_per_node;
  p.global_batch = static_cast<int>(checked_int_product({t.micro_batch_per_node, t.micro_batches, s.nodes},
                                                        "micro_batch_per_node x micro_batches x nodes"));
  p.schedule = PipelineSchedule::one_f_one_b;  // one stage: each micro-batch's forward, then its backward
  if (s.layout == Layout::moda)
    p.placement = {ParallelDim::data, ParallelDim::expert, ParallelDim::tensor, ParallelDim::pipeline};
  else
    p.placement = {ParallelDim::expert, ParallelDim::data, ParallelDim::tensor, ParallelDim::pipeline};
  return p;
}

Placement place_in_supernodes(const ModelSpec& m, const PlanSpec& plan, int machine_nps, Workload& w) {
  Placement p;
  p.ranks = plan.nodes;
  p.experts = m.experts_per_layer;
  p.replicas = p.ranks / p.experts;
  p.nodes_per_supernode_used = plan.nodes_per_supernode_used;
  p.supernodes_used = p.ranks / p.nodes_per_supernode_used;
  const int K = p.nodes_per_supernode_used, E = p.experts, R = p.replicas, N = p.ranks;
  // The inner block of the layout (replicas for MoDa, an MoE group for inverse): ranks at
  // the same offset inside their supernode behave alike when that block tiles the supernode.
  const int block = plan.layout == Layout::moda ? R : E;
  const bool tiles = block <= K && K % block == 0;
  // MoDa with a direct all-to-all: when the replica blocks tile the supernode, every rank sends
  // to the same numbers of peers inside and across supernodes, and its replica, supernode and
  // cross-supernode rings have the same shape, so all ranks behave alike (one class). A pairwise
  // or hierarchical exchange orders its peers by index, so there a rank's offset matters.
  const bool symmetric = plan.layout == Layout::moda && plan.all_to_all == CollectiveAlgorithm::direct && tiles;
  for (int r = 0; r < N; ++r) {
    const int sn = r / K, pos = r % K;
    w.node_of_rank[r] = sn * machine_nps + pos;
    w.class_of_rank[r] = symmetric ? 0 : tiles ? pos / block : pos;
  }
  for (auto& [role, table] : w.groups) table.block_size = supernode_block_size(table, K);
  return p;
}

ModaWorkload build_moda_workload(const ModelSpec& m, const TrainingSpec& t, const PlanSpec& plan, int machine_nps) {
  ModaWorkload out;
  out.step = build_placed_transformer_workload(m, t, moda_parallel_plan(m, t, plan));
  out.placement = place_in_supernodes(m, plan, machine_nps, out.step.workload);
  return out;
}

}  // namespace exasim
