#include "models/moda_placement.hpp"

#include <functional>
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

// K: ranks per supernode.
GroupTable make_groups(int groups, int size, int ranks, int K, const std::function<int(int, int)>& rank_at) {
  GroupTable t;
  t.members.assign(groups, std::vector<int>(size));
  for (int g = 0; g < groups; ++g)
    for (int i = 0; i < size; ++i) t.members[g][i] = rank_at(g, i);
  t.index(ranks);
  t.block_size = supernode_block_size(t, K);
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
  if (plan.layout == Layout::moda) {
    w.groups["moe"] = make_groups(R, E, N, K, [R](int i, int e) { return e * R + i; });
    w.groups["expert_replicas"] = make_groups(E, R, N, K, [R](int e, int i) { return e * R + i; });
  } else {
    w.groups["moe"] = make_groups(R, E, N, K, [E](int i, int e) { return i * E + e; });
    w.groups["expert_replicas"] = make_groups(E, R, N, K, [E](int e, int i) { return i * E + e; });
  }
  w.groups["supernode"] = make_groups(p.supernodes_used, K, N, K, [K](int s, int i) { return s * K + i; });
  w.groups["across_supernodes"] = make_groups(K, p.supernodes_used, N, K, [K](int pos, int s) { return s * K + pos; });
  return p;
}

}  // namespace exasim
