#include "models/moda_placement.hpp"

#include <functional>
#include <stdexcept>

namespace exasim {

namespace {
GroupTable make_groups(int groups, int size, int ranks, const std::function<int(int, int)>& rank_at) {
  GroupTable t;
  t.members.assign(groups, std::vector<int>(size));
  for (int g = 0; g < groups; ++g)
    for (int i = 0; i < size; ++i) t.members[g][i] = rank_at(g, i);
  t.index(ranks);
  return t;
}
}  // namespace

Placement place_moe_ranks(const ModelSpec& model, const PlanSpec& plan, int machine_nps, Workload& w) {
  Placement p;
  p.ranks = plan.nodes;
  p.experts = model.experts_per_layer;
  if (p.experts <= 0 || p.ranks % p.experts != 0)
    throw std::invalid_argument("ranks must be a multiple of the experts per layer");
  p.replicas = p.ranks / p.experts;
  p.nodes_per_supernode_used = plan.nodes_per_supernode_used;
  if (p.nodes_per_supernode_used <= 0 || p.ranks % p.nodes_per_supernode_used != 0)
    throw std::invalid_argument("ranks must fill whole supernodes");
  p.supernodes_used = p.ranks / p.nodes_per_supernode_used;
  const int K = p.nodes_per_supernode_used, E = p.experts, R = p.replicas, N = p.ranks;

  w.rank_count = N;
  w.node_of_rank.resize(N);
  w.class_of_rank.resize(N);
  // The inner block of the layout (replicas for MoDa, an MoE group for inverse): ranks at
  // the same offset inside their supernode behave alike when that block tiles the supernode.
  const int block = plan.layout == Layout::moda ? R : E;
  for (int r = 0; r < N; ++r) {
    const int sn = r / K, pos = r % K;
    w.node_of_rank[r] = sn * machine_nps + pos;
    w.class_of_rank[r] = (block <= K && K % block == 0) ? pos / block : pos;
  }
  if (plan.layout == Layout::moda) {
    w.groups["moe"] = make_groups(R, E, N, [R](int i, int e) { return e * R + i; });
    w.groups["expert_replicas"] = make_groups(E, R, N, [R](int e, int i) { return e * R + i; });
  } else {
    w.groups["moe"] = make_groups(R, E, N, [E](int i, int e) { return i * E + e; });
    w.groups["expert_replicas"] = make_groups(E, R, N, [E](int e, int i) { return i * E + e; });
  }
  w.groups["supernode"] = make_groups(p.supernodes_used, K, N, [K](int s, int i) { return s * K + i; });
  w.groups["across_supernodes"] = make_groups(K, p.supernodes_used, N, [K](int pos, int s) { return s * K + pos; });
  return p;
}

}  // namespace exasim
