#include "models/plan_placement.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "models/tensor_parallel.hpp"

namespace exasim {

namespace {
int dim_index(ParallelDim d) {
  switch (d) {
    case ParallelDim::tensor: return 0;
    case ParallelDim::data: return 1;
    case ParallelDim::pipeline: return 2;
    case ParallelDim::context: return 3;
    case ParallelDim::expert: break;
  }
  throw std::invalid_argument("placement: the expert dimension is placed inside the data dimension, not on its own");
}
// Hierarchical reduction (ParallelPlan::supernode_ranks K): each "dp" group cut into blocks of K
// consecutive members ("supernode"), and the members at one position of every block ("across_supernodes").
void add_supernode_groups(const ParallelPlan& plan, Workload& w) {
  const int K = plan.supernode_ranks;
  if (plan.data % K != 0)
    throw std::invalid_argument("placement: supernode_ranks (" + std::to_string(K) + ") must divide data_parallel (" +
                                std::to_string(plan.data) + ")");
  GroupTable inside, across;
  for (const auto& dp : w.groups.at("dp").members) {
    const int blocks = plan.data / K;
    for (int b = 0; b < blocks; ++b) inside.members.emplace_back(dp.begin() + b * K, dp.begin() + (b + 1) * K);
    for (int i = 0; i < K; ++i) {
      std::vector<int> m;
      for (int b = 0; b < blocks; ++b) m.push_back(dp[b * K + i]);
      across.members.push_back(std::move(m));
    }
  }
  inside.index(w.rank_count);
  across.index(w.rank_count);
  w.groups["supernode"] = std::move(inside);
  w.groups["across_supernodes"] = std::move(across);
}
}  // namespace

int PlanPlacement::rank_of(const RankCoords& c) const {
  return c.tensor * strides[0] + c.data * strides[1] + c.pipeline * strides[2] + c.context * strides[3];
}

namespace {
// The strides of each dimension in the placement order (context after tensor unless listed);
// returns whether "expert" is listed after "data" (the replicas of the same experts are neighbours).
bool place_strides(const ParallelPlan& plan, PlanPlacement& pl) {
  std::array<int, 4> seen{};
  int stride = 1;
  bool experts_outer = false;
  bool data_seen = false;
  std::vector<ParallelDim> order = plan.placement;
  if (std::find(order.begin(), order.end(), ParallelDim::context) == order.end()) {
    auto t = std::find(order.begin(), order.end(), ParallelDim::tensor);
    order.insert(t == order.end() ? order.begin() : t + 1, ParallelDim::context);
  }
  for (ParallelDim d : order) {
    if (d == ParallelDim::expert) {
      experts_outer = data_seen;
      continue;
    }
    if (d == ParallelDim::data) data_seen = true;
    const int i = dim_index(d);
    if (seen[i]++) throw std::invalid_argument(std::string("placement: ") + to_string(d) + " is listed twice");
    pl.strides[i] = stride;
    stride = checked_int_product({stride, pl.sizes[i]}, "the placement's strides");
  }
  for (int i = 0; i < 3; ++i)
    if (!seen[i]) throw std::invalid_argument("placement: must list tensor, data and pipeline");
  return experts_outer;
}

// Every rank's coordinates, and its node, program and class (its pipeline stage).
void place_ranks(const ParallelPlan& plan, int N, PlanPlacement& pl, Workload& w) {
  pl.coords.resize(N);
  for (int t = 0; t < plan.tensor; ++t)
    for (int d = 0; d < plan.data; ++d)
      for (int p = 0; p < plan.pipeline; ++p)
        for (int c = 0; c < plan.context; ++c) {
          const RankCoords rc{t, d, p, c};
          pl.coords[pl.rank_of(rc)] = rc;
        }
  w.rank_count = N;
  w.node_of_rank.resize(N);
  w.program_of_rank.resize(N);
  w.class_of_rank.resize(N);
  for (int r = 0; r < N; ++r) {
    w.node_of_rank[r] = r;
    w.program_of_rank[r] = pl.coords[r].pipeline;
    w.class_of_rank[r] = pl.coords[r].pipeline;
  }
}

// "dp": one group per (tensor, stage) over data x context (Megatron-Core's data-and-context
// group: context ranks hold the same weights); "cp": one per (tensor, data, stage); "pp": one
// per (tensor, context, data).
void add_data_context_pipeline_groups(const ParallelPlan& plan, const PlanPlacement& pl, Workload& w) {
  const int C = plan.context;
  GroupTable dp, cp, pp;
  for (int p = 0; p < plan.pipeline; ++p)
    for (int t = 0; t < plan.tensor; ++t) {
      std::vector<int> m;
      for (int d = 0; d < plan.data; ++d)
        for (int c = 0; c < C; ++c) m.push_back(pl.rank_of({t, d, p, c}));
      dp.members.push_back(std::move(m));
      for (int d = 0; d < plan.data; ++d) {
        std::vector<int> ring;
        for (int c = 0; c < C; ++c) ring.push_back(pl.rank_of({t, d, p, c}));
        cp.members.push_back(std::move(ring));
      }
    }
  for (int d = 0; d < plan.data; ++d)
    for (int t = 0; t < plan.tensor; ++t)
      for (int c = 0; c < C; ++c) {
        std::vector<int> m;
        for (int p = 0; p < plan.pipeline; ++p) m.push_back(pl.rank_of({t, d, p, c}));
        pp.members.push_back(std::move(m));
      }
  dp.index(w.rank_count);
  cp.index(w.rank_count);
  pp.index(w.rank_count);
  w.groups["dp"] = std::move(dp);
  w.groups["cp"] = std::move(cp);
  w.groups["pp"] = std::move(pp);
}

// Expert parallelism inside the data dimension: "ep" groups the replicas that exchange tokens,
// "expert_dp" the replicas that hold the same experts (they reduce the experts' gradients).
// By default (or "expert" before "data") an ep group is `expert` consecutive replicas; with
// "expert" after "data" the replicas of the same experts are consecutive and an ep group is
// strided across them (BaGuaLu's MoDa: expert replicas inside a supernode, all-to-all across).
void add_expert_groups(const ParallelPlan& plan, const PlanPlacement& pl, bool experts_outer, Workload& w) {
  if (plan.expert < 1 || plan.data % plan.expert != 0)
    throw std::invalid_argument("placement: expert_parallel must divide data_parallel");
  const int replicas = plan.data / plan.expert;
  auto data_index = [&](int g, int e) { return experts_outer ? e * replicas + g : g * plan.expert + e; };
  GroupTable ep, edp;
  for (int p = 0; p < plan.pipeline; ++p)
    for (int t = 0; t < plan.tensor; ++t)
      for (int c = 0; c < plan.context; ++c) {
        for (int g = 0; g < replicas; ++g) {
          std::vector<int> m;
          for (int e = 0; e < plan.expert; ++e) m.push_back(pl.rank_of({t, data_index(g, e), p, c}));
          ep.members.push_back(std::move(m));
        }
        for (int e = 0; e < plan.expert; ++e) {
          std::vector<int> m;
          for (int g = 0; g < replicas; ++g) m.push_back(pl.rank_of({t, data_index(g, e), p, c}));
          edp.members.push_back(std::move(m));
        }
      }
  ep.index(w.rank_count);
  edp.index(w.rank_count);
  w.groups["ep"] = std::move(ep);
  w.groups["expert_dp"] = std::move(edp);
}

// Tensor-parallel roles: within each (data, stage) tensor group, the mode's sub-groups
// (models/tensor_parallel.hpp).
void add_tensor_groups(const ParallelPlan& plan, const PlanPlacement& pl, Workload& w) {
  const TensorLayout layout = tensor_layout(plan);
  for (const std::string& role : tensor_group_roles(plan.tensor_mode)) {
    GroupTable g;
    for (int p = 0; p < plan.pipeline; ++p)
      for (int d = 0; d < plan.data; ++d)
        for (int c = 0; c < plan.context; ++c) {
          std::vector<std::vector<int>> sub;
          for (int t = 0; t < plan.tensor; ++t) {
            const TensorGroupPosition pos = tensor_group_position(layout, role, t);
            if (pos.group >= static_cast<int>(sub.size())) sub.resize(pos.group + 1);
            auto& members = sub[pos.group];
            if (pos.member >= static_cast<int>(members.size())) members.resize(pos.member + 1, -1);
            members[pos.member] = pl.rank_of({t, d, p, c});
          }
          for (auto& m : sub) g.members.push_back(std::move(m));
        }
    g.index(w.rank_count);
    w.groups[role] = std::move(g);
  }
}
}  // namespace

PlanPlacement place_plan(const ParallelPlan& plan, Workload& w) {
  PlanPlacement pl;
  pl.sizes = {plan.tensor, plan.data, plan.pipeline, plan.context};
  const int N = plan.devices();  // checked: throws past a 32-bit rank count, before any rank is placed
  const bool experts_outer = place_strides(plan, pl);
  place_ranks(plan, N, pl, w);
  add_data_context_pipeline_groups(plan, pl, w);
  add_expert_groups(plan, pl, experts_outer, w);
  if (plan.supernode_ranks > 0) add_supernode_groups(plan, w);
  add_tensor_groups(plan, pl, w);
  return pl;
}

}  // namespace exasim
