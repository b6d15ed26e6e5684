// Stragglers (topologies/faults.hpp) on an ideal machine: a synchronous data-parallel step of D
// ranks, each computing T seconds then ring all-reducing B bytes over one group, on the star
// network of ideal_machine.hpp (link bandwidth W, latency L; a flow crosses two links, and in a
// ring no two flows share a link). Without stragglers the step is T + A, A the ring's alpha-beta
// time 2 (D - 1) (2 L + B / D / W).
//   * one straggler at compute_factor 2: the ring cannot finish before the straggler has joined
//     it, and after it joins every ring step waits for the step before: 2 T + A.
//   * one straggler at link_factor 2 (its NIC at W / 2): every ring step waits for the flows into
//     and out of it: T + 2 (D - 1) (2 L + B / D / (W / 2)).
// Each holds in both fidelities (folded: the straggler's class and the class of its group's other
// members, which waits for it). Each TEST_CASE simulates at most once (one SimGrid engine per
// process). The draw of a seeded fraction and the class split are checked without simulating.
#include <doctest/doctest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/collectives.hpp"
#include "sim/engine.hpp"
#include "sim/workload.hpp"
#include "tests/unit/approx.hpp"
#include "tests/unit/ideal_machine.hpp"
#include "topologies/faults.hpp"

using namespace exasim;

namespace {

constexpr int kRanks = 8;
constexpr double kRate_flops_per_s = 1e12;
constexpr double kCompute_s = 1.0;
constexpr double kBytes = 8e8;
constexpr double kBandwidth_Bps = 10e9;
constexpr double kLatency_s = 2e-6;

// D ranks on nodes 0..D-1, one class, one data-parallel group: compute then a ring all-reduce.
Workload data_parallel_step() {
  Workload w;
  w.rank_count = kRanks;
  for (int r = 0; r < kRanks; ++r) {
    w.node_of_rank.push_back(r);
    w.class_of_rank.push_back(0);
  }
  GroupTable t;
  t.members = {{}};
  for (int r = 0; r < kRanks; ++r) t.members[0].push_back(r);
  t.index(kRanks);
  w.groups["data"] = t;
  const OpId c = add_op(w.programs[0], Op{"compute", "fwd_bwd", Phase::backward,
                                          ComputeWork{Kernel::gemm, Precision::fp32, kCompute_s * kRate_flops_per_s, 0, {}}},
                        {});
  add_op(w.programs[0], Op{"grad_all_reduce", "grad_all_reduce", Phase::optimizer,
                           CollectiveWork{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "data", kBytes}},
         {c});
  return w;
}

double ring_s(double bandwidth_Bps) {
  return CollectiveSchedule(CollectiveKind::all_reduce, CollectiveAlgorithm::ring, kRanks, kBytes)
      .alpha_beta_time_s(2 * kLatency_s, bandwidth_Bps);
}

// The step with rank 3 a straggler (compute x compute_factor, links at 1 / link_factor).
SimResult run_with_straggler(Fidelity fid, double compute_factor, double link_factor) {
  Workload w = data_parallel_step();
  const test::StarNetwork base(kRanks, kBandwidth_Bps, kLatency_s);
  FaultyNetwork net(base);
  StragglerSpec s;
  s.nodes = {3};
  s.compute_factor = compute_factor;
  s.link_factor = link_factor;
  const AppliedStragglers a = apply_stragglers(s, 0, w, net);
  REQUIRE(a.nodes == std::vector<int>{3});
  REQUIRE(a.ranks == 1);
  REQUIRE(split_classes_by_faults(w, net) == 2);
  const test::FixedRateCostModel cost(kRate_flops_per_s);
  return simulate(w, net, cost, EngineOptions{fid});
}

}  // namespace

TEST_CASE("stragglers: the hand-computed ring time without a straggler is T + A") {
  // The baseline the straggler cases are measured against, from the same closed form.
  const double A = 2 * (kRanks - 1) * (2 * kLatency_s + kBytes / kRanks / kBandwidth_Bps);
  CHECK(ring_s(kBandwidth_Bps) == test::rel(A, 1e-12));
  CHECK(A == test::rel(0.140056, 1e-9));
}

TEST_CASE("stragglers: one rank at compute factor 2 slows an exhaustive data-parallel step by T") {
  const SimResult r = run_with_straggler(Fidelity::exhaustive, 2, 1);
  CHECK(r.step_time_s == test::rel(2 * kCompute_s + ring_s(kBandwidth_Bps), 1e-9));
}

TEST_CASE("stragglers: one rank at compute factor 2 slows a folded data-parallel step by T") {
  const SimResult r = run_with_straggler(Fidelity::folded, 2, 1);
  CHECK(r.stats.simulated_ranks == 2);  // the straggler's class and its group's other members
  CHECK(r.step_time_s == test::rel(2 * kCompute_s + ring_s(kBandwidth_Bps), 1e-9));
  // Every simulated rank waits for the straggler: the step ends together. The other class (ranks 0-2
  // and 4-7, the straggler rank 3) runs its early ring steps at T (Replay::ring_gate: a member runs
  // 1 + its class's members directly upstream of it: ranks 4, 5, 6, 7, 0, 1, 2 run 1 .. 7 steps,
  // 28 over 7 members, 4 steps), the rest from the straggler's arrival 2 T plus those 4 steps'
  // fill: 2 T + 4 s + 10 s = 2 T + A (s = A / 14, D = 8). Without the fill it would end at
  // 2 T + 10 s.
  for (const SimulatedRank& sr : r.ranks)
    CHECK(sr.ops.back().end_s == test::rel(r.step_time_s, 1e-9));
}

TEST_CASE("stragglers: one rank at link factor 2 paces every exhaustive ring step") {
  const SimResult r = run_with_straggler(Fidelity::exhaustive, 1, 2);
  CHECK(r.step_time_s == test::rel(kCompute_s + ring_s(kBandwidth_Bps / 2), 1e-9));
}

TEST_CASE("stragglers: one rank at link factor 2 paces every folded ring step") {
  const SimResult r = run_with_straggler(Fidelity::folded, 1, 2);
  CHECK(r.step_time_s == test::rel(kCompute_s + ring_s(kBandwidth_Bps / 2), 1e-9));
}

TEST_CASE("stragglers: a drawn fraction is round(f x nodes) distinct nodes, the same for a seed") {
  std::vector<int> pool;
  for (int n = 0; n < 1000; ++n) pool.push_back(2 * n);
  const std::vector<int> a = draw_fraction(pool, 0.013, 42), b = draw_fraction(pool, 0.013, 42);
  CHECK(a.size() == 13);
  CHECK(a == b);
  CHECK(std::set<int>(a.begin(), a.end()).size() == 13);
  for (int n : a) CHECK(n % 2 == 0);
  CHECK(draw_fraction(pool, 0.013, 43) != a);
  CHECK(draw_fraction(pool, 0, 42).empty());
}

TEST_CASE("stragglers: classes split into the straggler, its groups' other members and the rest") {
  // Two data-parallel groups {0..3}, {4..7}; a straggler on node 1: classes {1}, {0, 2, 3}, {4..7}.
  Workload w = data_parallel_step();
  w.groups["data"].members = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  w.groups["data"].index(kRanks);
  const test::StarNetwork base(kRanks, kBandwidth_Bps, kLatency_s);
  FaultyNetwork net(base);
  net.slow_compute(1, 1.5);
  CHECK(split_classes_by_faults(w, net) == 3);
  const auto& c = w.class_of_rank;
  CHECK(c[0] == c[2]);
  CHECK(c[0] == c[3]);
  CHECK(c[1] != c[0]);
  CHECK(c[4] != c[0]);
  CHECK(c[4] != c[1]);
  for (int r = 5; r < 8; ++r) CHECK(c[r] == c[4]);
}

TEST_CASE("stragglers: an explicit node outside the job is refused") {
  Workload w = data_parallel_step();
  const test::StarNetwork base(kRanks, kBandwidth_Bps, kLatency_s);
  FaultyNetwork net(base);
  StragglerSpec s;
  s.nodes = {9};
  s.compute_factor = 2;
  CHECK_THROWS_WITH_AS(apply_stragglers(s, 0, w, net), doctest::Contains("node 9 is not one of the job's 8"),
                       FaultError);
}

// --- network faults without simulating: spares, degraded links, the roles they slow

namespace {

// Sunway with 4-node supernodes, 2 supernodes; the job uses nodes 0-2 and 4-6 (3 per supernode).
MachineSpec small_sunway() {
  MachineSpec m;
  m.family = "sunway";
  m.nodes_per_supernode = 4;
  m.supernodes = 2;
  return m;
}

Workload six_ranks() {
  Workload w;
  w.rank_count = 6;
  w.node_of_rank = {0, 1, 2, 4, 5, 6};
  w.class_of_rank.assign(6, 0);
  GroupTable t;
  t.members = {{0, 1, 2}, {3, 4, 5}};
  t.index(6);
  w.groups["data"] = t;
  return w;
}

}  // namespace

TEST_CASE("faults: a failed Sunway node is re-placed on its supernode's unused node") {
  Workload w = six_ranks();
  NodeFaultSpec f;
  f.nodes = {5};
  f.spares = 1;
  const AppliedNodeFaults a = apply_node_faults(f, 0, small_sunway(), w);
  CHECK(a.failed == std::vector<int>{5});
  CHECK(a.replaced == std::vector<int>{7});
  CHECK(w.node_of_rank == std::vector<int>{0, 1, 2, 4, 7, 6});
}

TEST_CASE("faults: more failures in a supernode than its spares are refused") {
  Workload w = six_ranks();
  NodeFaultSpec f;
  f.nodes = {0, 1};
  f.spares = 1;
  CHECK_THROWS_WITH_AS(apply_node_faults(f, 0, small_sunway(), w), doctest::Contains("more failures than spares"),
                       FaultError);
  f.spares = 2;  // two spares allowed, but the supernode has one unused node
  CHECK_THROWS_WITH_AS(apply_node_faults(f, 0, small_sunway(), w), doctest::Contains("spare domain 0"), FaultError);
}

TEST_CASE("faults: a failed GPU's machine node is replaced GPU for GPU in its leaf group") {
  MachineSpec m;
  m.family = "gpu_cluster";
  m.gpu.nodes = 4;
  m.gpu.gpus_per_node = 2;
  m.gpu.nodes_per_leaf_group = 2;
  Workload w;  // GPUs 0-1 (node 0) and 4-5 (node 2)
  w.rank_count = 4;
  w.node_of_rank = {0, 1, 4, 5};
  w.class_of_rank.assign(4, 0);
  NodeFaultSpec f;
  f.nodes = {5};
  f.spares = 1;
  const AppliedNodeFaults a = apply_node_faults(f, 0, m, w);
  CHECK(a.replaced == std::vector<int>{7});  // node 3, its second GPU
  CHECK(w.node_of_rank == std::vector<int>{0, 1, 6, 7});
}

TEST_CASE("faults: degraded links by kind and instance, unknown kinds and instances refused") {
  const Workload w = data_parallel_step();
  const test::StarNetwork base(kRanks, kBandwidth_Bps, kLatency_s);
  FaultyNetwork net(base);
  LinkFaultSpec l;
  l.kind = "up";
  l.instances = {2};
  l.bandwidth_factor = 0.25;
  const auto a = apply_link_faults({l}, 0, w, net);
  REQUIRE(a.size() == 1);
  CHECK(a[0].instances == std::vector<int>{2});
  CHECK(net.bandwidth_factor(0, 2) == 0.25);
  CHECK(net.bandwidth_factor(0, 1) == 1);
  CHECK(net.bandwidth_factor(1, 2) == 1);
  l.kind = "sideways";
  CHECK_THROWS_WITH_AS(apply_link_faults({l}, 0, w, net), doctest::Contains("one of: up, down"), FaultError);
  l.kind = "down";
  l.instances = {8};
  try {
    apply_link_faults({LinkFaultSpec{}, l}, 0, w, net);
    FAIL("expected a FaultError");
  } catch (const FaultError& e) {
    // the first entry's kind "" is unknown: entry 0
    CHECK(e.path == "/links/0/kind");
  }
  try {
    LinkFaultSpec ok = l;
    ok.instances = {1};
    apply_link_faults({ok, l}, 0, w, net);
    FAIL("expected a FaultError");
  } catch (const FaultError& e) {
    CHECK(e.path == "/links/1/instances");
  }
}

TEST_CASE("faults: a degraded link slows the roles of the groups that use it") {
  Workload w = six_ranks();
  const test::StarNetwork base(8, kBandwidth_Bps, kLatency_s);
  FaultyNetwork net(base);
  CHECK(roles_touched_by_faults(w, net).empty());
  net.scale_bandwidth(1, 5, 0.5);  // node 5's down link: rank 4, group 1
  CHECK(roles_touched_by_faults(w, net) == std::vector<std::string>{"data"});
  CHECK(split_classes_by_faults(w, net) == 3);  // rank 4; ranks 3 and 5; ranks 0-2
}
