// Collective schedules (shape of the steps) and their simulated times against the alpha-beta
// closed form on a tiny uncongested "star" network; plus the roofline cost of a compute op.
// Each TEST_CASE that simulates does so exactly once (SimGrid allows one engine per process).
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/collectives.hpp"
#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/network.hpp"
#include "sim/workload.hpp"
#include "tests/unit/approx.hpp"
#include "tests/unit/ideal_machine.hpp"

using namespace exasim;

namespace {

constexpr double kB = 10e9;   // bytes/s
constexpr double kL = 2e-6;   // s per link

// A workload of n ranks (rank r on node r, all of class 0) whose step is one collective
// over the role "all" that holds every rank.
Workload one_collective(int n, CollectiveKind kind, CollectiveAlgorithm algo, double bytes, int block_size = 1) {
  return test::one_collective_workload(n, CollectiveWork{kind, algo, "all", bytes}, Phase::forward, "coll", block_size);
}

RooflineCostModel test_cost_model() {
  DeviceProfile d;
  d.name = "test-device";
  d.peak_flops_per_s = {{Precision::fp32, 2e12}, {Precision::fp16, 8e12}};
  d.gemm_efficiency = {{Precision::fp32, 0.8}, {Precision::fp16, 0.5}};
  d.memory_bandwidth_Bps = 100e9;
  d.optimizer_memory_bandwidth_Bps = 100e9;
  return RooflineCostModel(d);
}

// Simulates one collective of `bytes` among n ranks on the star and compares with the
// schedule's alpha-beta time (alpha = two links' latency, beta = B).
void check_against_closed_form(int n, CollectiveKind kind, CollectiveAlgorithm algo, Fidelity fid, int block_size = 1) {
  const double bytes = 8.0 * 1024 * 1024 * n;  // divisible by n: whole-byte chunks
  const Workload w = one_collective(n, kind, algo, bytes, block_size);
  const test::StarNetwork net(n, kB, kL);
  const RooflineCostModel cost = test_cost_model();
  EngineOptions opt;
  opt.fidelity = fid;
  const SimResult res = simulate(w, net, cost, opt);
  const double expected = CollectiveSchedule(kind, algo, n, bytes, block_size).alpha_beta_time_s(2 * kL, kB);
  INFO("simulated ", res.step_time_s, " s, closed form ", expected, " s");
  CHECK(expected > 0);
  CHECK(std::fabs(res.step_time_s - expected) <= 1e-6 * expected);
  CHECK(res.fidelity == fid);
  // Every simulated rank's op ends by the step's end.
  for (const auto& r : res.ranks) CHECK(r.ops.at(0).end_s <= res.step_time_s);
  if (fid == Fidelity::exhaustive) {
    CHECK(res.stats.simulated_ranks == n);
  } else {
    CHECK(res.stats.simulated_ranks == 1);
    REQUIRE(res.ranks.size() == 1);
    CHECK(res.ranks[0].multiplicity == n);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Schedule shape
// ---------------------------------------------------------------------------------------------

TEST_CASE("collectives: ring all_reduce schedule with 4 members") {
  const int n = 4;
  const double bytes = 400;
  const CollectiveSchedule s(CollectiveKind::all_reduce, CollectiveAlgorithm::ring, n, bytes);
  CHECK(s.group_size() == n);
  CHECK(s.step_count() == 2 * (n - 1));
  CollectiveStep st;
  for (int m = 0; m < n; ++m)
    for (int k = 0; k < s.step_count(); ++k) {
      s.step(m, k, st);
      REQUIRE(st.sends.size() == 1);
      CHECK(st.sends[0].peer == (m + 1) % n);
      CHECK(st.sends[0].bytes == test::rel(bytes / n));
      REQUIRE(st.recv_from.size() == 1);
      CHECK(st.recv_from[0] == (m + n - 1) % n);
    }
  CHECK(s.alpha_beta_time_s(1e-6, 1e9) == test::rel(6 * (1e-6 + 100 / 1e9)));
}

TEST_CASE("collectives: ring reduce_scatter and all_gather take n-1 steps") {
  const CollectiveSchedule rs(CollectiveKind::reduce_scatter, CollectiveAlgorithm::ring, 5, 500);
  const CollectiveSchedule ag(CollectiveKind::all_gather, CollectiveAlgorithm::ring, 5, 500);
  CHECK(rs.step_count() == 4);
  CHECK(ag.step_count() == 4);
  CollectiveStep st;
  rs.step(4, 2, st);
  REQUIRE(st.sends.size() == 1);
  CHECK(st.sends[0].peer == 0);
  CHECK(st.sends[0].bytes == test::rel(100));
  REQUIRE(st.recv_from.size() == 1);
  CHECK(st.recv_from[0] == 3);
}

TEST_CASE("collectives: hierarchical all_to_all of 6 in blocks of 3, by hand") {
  // Member 4 is offset 1 of block 1 (members 3, 4, 5); blocks: {0, 1, 2} and {3, 4, 5}.
  const double bytes = 600, chunk = 100;
  const CollectiveSchedule s(CollectiveKind::all_to_all, CollectiveAlgorithm::hierarchical, 6, bytes, 3);
  CHECK(s.step_count() == 3);  // (3 - 1) inside + (2 - 1) across
  CollectiveStep st;
  s.step(4, 0, st);  // inside: to offset 2, the 2 chunks bound for offset 2 of both blocks
  REQUIRE(st.sends.size() == 1);
  CHECK(st.sends[0].peer == 5);
  CHECK(st.sends[0].bytes == test::rel(2 * chunk));
  CHECK(st.recv_from == std::vector<int>{3});
  s.step(4, 1, st);
  CHECK(st.sends[0].peer == 3);
  CHECK(st.recv_from == std::vector<int>{5});
  s.step(4, 2, st);  // across: to offset 1 of block 0, the 3 chunks bound for that block
  CHECK(st.sends[0].peer == 1);
  CHECK(st.sends[0].bytes == test::rel(3 * chunk));
  CHECK(st.recv_from == std::vector<int>{1});
  // alpha-beta: 2 steps of (a + 2 chunks / B) and 1 step of (a + 3 chunks / B).
  CHECK(s.alpha_beta_time_s(1e-6, 1e9) == test::rel(2 * (1e-6 + 200 / 1e9) + (1e-6 + 300 / 1e9)));
  // Every (source, destination) piece reaches its destination: follow the two hops.
  for (int src = 0; src < 6; ++src)
    for (int dst = 0; dst < 6; ++dst) {
      if (src == dst) continue;
      // Hop 1 (inside the source's block) to the member at the destination's offset.
      const int via = (src / 3) * 3 + dst % 3;
      bool hop1 = via == src;
      for (int k = 0; k < 2 && !hop1; ++k) {
        s.step(src, k, st);
        hop1 = st.sends[0].peer == via;
      }
      bool hop2 = via == dst;
      for (int k = 2; k < 3 && !hop2; ++k) {
        s.step(via, k, st);
        hop2 = st.sends[0].peer == dst;
      }
      INFO("piece ", src, " -> ", dst);
      CHECK(hop1);
      CHECK(hop2);
    }
  // Blocks that do not divide the group are refused; block 1 is the pairwise exchange.
  CHECK_THROWS_AS(CollectiveSchedule(CollectiveKind::all_to_all, CollectiveAlgorithm::hierarchical, 6, bytes, 4),
                  std::invalid_argument);
  CHECK(CollectiveSchedule(CollectiveKind::all_to_all, CollectiveAlgorithm::hierarchical, 6, bytes, 1).step_count() == 5);
}

TEST_CASE("collectives: hierarchical all_reduce of 6 in blocks of 3, by hand") {
  const double bytes = 600;
  const CollectiveSchedule s(CollectiveKind::all_reduce, CollectiveAlgorithm::hierarchical, 6, bytes, 3);
  CHECK(s.step_count() == 2 * 2 + 2 * 1);  // RS 2, across 2, AG 2
  CollectiveStep st;
  const int expected_peer[] = {5, 5, 1, 1, 5, 5};  // member 4: next in block {3, 4, 5}, then block 0's offset 1
  const double expected_bytes[] = {200, 200, 100, 100, 200, 200};
  for (int k = 0; k < 6; ++k) {
    CAPTURE(k);
    s.step(4, k, st);
    REQUIRE(st.sends.size() == 1);
    CHECK(st.sends[0].peer == expected_peer[k]);
    CHECK(st.sends[0].bytes == test::rel(expected_bytes[k]));
    CHECK(st.recv_from == std::vector<int>{k < 2 || k >= 4 ? 3 : 1});
  }
  CHECK(s.alpha_beta_time_s(1e-6, 1e9) == test::rel(4 * (1e-6 + 200 / 1e9) + 2 * (1e-6 + 100 / 1e9)));
  // One block, or blocks of one, is the plain ring.
  const CollectiveSchedule ring(CollectiveKind::all_reduce, CollectiveAlgorithm::ring, 6, bytes);
  for (int L : {1, 6})
    CHECK(CollectiveSchedule(CollectiveKind::all_reduce, CollectiveAlgorithm::hierarchical, 6, bytes, L)
              .alpha_beta_time_s(1e-6, 1e9) == test::rel(ring.alpha_beta_time_s(1e-6, 1e9)));
  CHECK_THROWS_AS(CollectiveSchedule(CollectiveKind::reduce_scatter, CollectiveAlgorithm::hierarchical, 6, bytes, 3),
                  std::invalid_argument);
}

TEST_CASE("collectives: pairwise all_to_all step k sends to distance k+1") {
  const int n = 6;
  const double bytes = 600;
  const CollectiveSchedule s(CollectiveKind::all_to_all, CollectiveAlgorithm::pairwise, n, bytes);
  CHECK(s.step_count() == n - 1);
  CollectiveStep st;
  for (int m = 0; m < n; ++m) {
    std::vector<int> sent_to, received_from;
    for (int k = 0; k < s.step_count(); ++k) {
      s.step(m, k, st);
      REQUIRE(st.sends.size() == 1);
      CHECK(st.sends[0].peer == (m + k + 1) % n);
      CHECK(st.sends[0].bytes == test::rel(bytes / n));
      REQUIRE(st.recv_from.size() == 1);
      CHECK(st.recv_from[0] == (m + n - (k + 1)) % n);
      sent_to.push_back(st.sends[0].peer);
      received_from.push_back(st.recv_from[0]);
    }
    // Every other member exactly once, in both directions.
    std::vector<int> seen(n, 0), seen_r(n, 0);
    for (int p : sent_to) seen[p]++;
    for (int p : received_from) seen_r[p]++;
    for (int p = 0; p < n; ++p) {
      CHECK(seen[p] == (p == m ? 0 : 1));
      CHECK(seen_r[p] == (p == m ? 0 : 1));
    }
  }
}

TEST_CASE("collectives: direct all_to_all is one step with n-1 sends") {
  const int n = 5;
  const CollectiveSchedule s(CollectiveKind::all_to_all, CollectiveAlgorithm::direct, n, 500);
  CHECK(s.step_count() == 1);
  CollectiveStep st;
  for (int m = 0; m < n; ++m) {
    s.step(m, 0, st);
    CHECK(st.sends.size() == static_cast<size_t>(n - 1));
    CHECK(st.recv_from.size() == static_cast<size_t>(n - 1));
    for (const auto& snd : st.sends) {
      CHECK(snd.peer != m);
      CHECK(snd.peer >= 0);
      CHECK(snd.peer < n);
      CHECK(snd.bytes == test::rel(100));
    }
    for (int q : st.recv_from) CHECK(q != m);
  }
  // The sender's link carries n-1 chunks at once.
  CHECK(s.alpha_beta_time_s(1e-6, 1e9) == test::rel(1e-6 + 4 * 100 / 1e9));
}

TEST_CASE("collectives: invalid kind and algorithm pairs throw") {
  CHECK_THROWS_AS(CollectiveSchedule(CollectiveKind::all_to_all, CollectiveAlgorithm::ring, 4, 100),
                  std::invalid_argument);
  CHECK_THROWS_AS(CollectiveSchedule(CollectiveKind::all_reduce, CollectiveAlgorithm::pairwise, 4, 100),
                  std::invalid_argument);
  CHECK_THROWS_AS(CollectiveSchedule(CollectiveKind::all_reduce, CollectiveAlgorithm::direct, 4, 100),
                  std::invalid_argument);
  CHECK_THROWS_AS(CollectiveSchedule(CollectiveKind::reduce_scatter, CollectiveAlgorithm::direct, 4, 100),
                  std::invalid_argument);
  CHECK_THROWS_AS(CollectiveSchedule(CollectiveKind::all_gather, CollectiveAlgorithm::direct, 4, 100),
                  std::invalid_argument);
  CHECK_THROWS_AS(CollectiveSchedule(CollectiveKind::all_reduce, CollectiveAlgorithm::ring, 0, 100),
                  std::invalid_argument);
  CHECK_THROWS_AS(CollectiveSchedule(CollectiveKind::all_reduce, CollectiveAlgorithm::ring, 4, -1),
                  std::invalid_argument);
}

TEST_CASE("collectives: a group of one has zero steps and zero time") {
  for (auto [kind, algo] : {std::pair{CollectiveKind::all_reduce, CollectiveAlgorithm::ring},
                            std::pair{CollectiveKind::reduce_scatter, CollectiveAlgorithm::ring},
                            std::pair{CollectiveKind::all_gather, CollectiveAlgorithm::ring},
                            std::pair{CollectiveKind::all_to_all, CollectiveAlgorithm::pairwise},
                            std::pair{CollectiveKind::all_to_all, CollectiveAlgorithm::direct}}) {
    const CollectiveSchedule s(kind, algo, 1, 1000);
    CHECK(s.step_count() == 0);
    CHECK(s.alpha_beta_time_s(1e-6, 1e9) == 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Simulated against the closed form (one simulate per TEST_CASE)
// ---------------------------------------------------------------------------------------------

TEST_CASE("collectives sim: exhaustive ring all_reduce of 8 matches the closed form") {
  check_against_closed_form(8, CollectiveKind::all_reduce, CollectiveAlgorithm::ring, Fidelity::exhaustive);
}

// Exhaustive collectives' flows are created during the run, step by step (sim/live_collective.cpp).
// Rank 0 computes 2 s before the ring all-reduce; the others reach it at once and send their step-0
// chunks, which arrive before rank 0 has started (the receiver counts them in advance). The ring is
// paced by rank 0 from then on: every step of the collective follows its start, so the step is
// 2 s plus the collective's closed form.
TEST_CASE("collectives sim: exhaustive ring all_reduce of 4 with a late member is its closed form after it") {
  const int n = 4;
  const double bytes = 8.0 * 1024 * 1024 * n;
  const CollectiveWork c{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "all", bytes};
  Workload w = one_collective(n, c.kind, c.algorithm, bytes);
  w.programs.emplace_back();
  const double F = 3.2e12, P = 2e12, e = 0.8;  // 2 s
  const OpId g = add_op(w.programs[1], Op{"gemm", "gemm", Phase::forward, ComputeWork{Kernel::gemm, Precision::fp32, F, 1e3, {}}}, {});
  add_op(w.programs[1], Op{"coll", "coll", Phase::forward, c}, {g});
  w.program_of_rank = {1, 0, 0, 0};
  const test::StarNetwork net(n, kB, kL);
  const RooflineCostModel cost = test_cost_model();
  const SimResult res = simulate(w, net, cost, EngineOptions{Fidelity::exhaustive});
  const double collective = CollectiveSchedule(c.kind, c.algorithm, n, bytes).alpha_beta_time_s(2 * kL, kB);
  CHECK(res.step_time_s == test::rel(F / (P * e) + collective, 1e-6));
  CHECK(res.stats.flows == 2 * (n - 1) * n);
  // Ranks 1..3 end no earlier than rank 0 started: their last step waits on its flows.
  for (int r = 1; r < n; ++r) CHECK(res.ranks[r].ops[0].end_s > F / (P * e));
}

TEST_CASE("collectives sim: exhaustive ring reduce_scatter of 8 matches the closed form") {
  check_against_closed_form(8, CollectiveKind::reduce_scatter, CollectiveAlgorithm::ring, Fidelity::exhaustive);
}

TEST_CASE("collectives sim: exhaustive ring all_gather of 8 matches the closed form") {
  check_against_closed_form(8, CollectiveKind::all_gather, CollectiveAlgorithm::ring, Fidelity::exhaustive);
}

TEST_CASE("collectives sim: exhaustive pairwise all_to_all of 8 matches the closed form") {
  check_against_closed_form(8, CollectiveKind::all_to_all, CollectiveAlgorithm::pairwise, Fidelity::exhaustive);
}

TEST_CASE("collectives sim: exhaustive direct all_to_all of 8 matches the closed form") {
  check_against_closed_form(8, CollectiveKind::all_to_all, CollectiveAlgorithm::direct, Fidelity::exhaustive);
}

TEST_CASE("collectives sim: exhaustive hierarchical all_to_all of 12 in blocks of 4 matches the closed form") {
  check_against_closed_form(12, CollectiveKind::all_to_all, CollectiveAlgorithm::hierarchical, Fidelity::exhaustive, 4);
}

TEST_CASE("collectives sim: folded hierarchical all_to_all of 12 in blocks of 4 matches the closed form") {
  check_against_closed_form(12, CollectiveKind::all_to_all, CollectiveAlgorithm::hierarchical, Fidelity::folded, 4);
}

TEST_CASE("collectives sim: exhaustive hierarchical all_reduce of 12 in blocks of 4 matches the closed form") {
  check_against_closed_form(12, CollectiveKind::all_reduce, CollectiveAlgorithm::hierarchical, Fidelity::exhaustive, 4);
}

TEST_CASE("collectives sim: folded ring all_reduce of 8 matches the closed form") {
  check_against_closed_form(8, CollectiveKind::all_reduce, CollectiveAlgorithm::ring, Fidelity::folded);
}

TEST_CASE("collectives sim: folded pairwise all_to_all of 8 matches the closed form") {
  check_against_closed_form(8, CollectiveKind::all_to_all, CollectiveAlgorithm::pairwise, Fidelity::folded);
}

// ---------------------------------------------------------------------------------------------
// Roofline compute
// ---------------------------------------------------------------------------------------------

TEST_CASE("cost model: roofline time is the max of the flops and bytes bounds") {
  const RooflineCostModel cost = test_cost_model();
  // GEMM: flops / (peak * efficiency), bytes small.
  CHECK(cost.compute_time_s({Kernel::gemm, Precision::fp32, 1.6e12, 1e6, {}}) == test::rel(1.0));
  CHECK(cost.compute_time_s({Kernel::gemm, Precision::fp16, 4e12, 0, {}}) == test::rel(1.0));
  // GEMM limited by bytes.
  CHECK(cost.compute_time_s({Kernel::gemm, Precision::fp32, 1.0, 200e9, {}}) == test::rel(2.0));
  // Memory-bound: flops at full peak (no efficiency), bytes / bandwidth.
  CHECK(cost.compute_time_s({Kernel::residual_add, Precision::fp32, 2e12, 0, {}}) == test::rel(1.0));
  CHECK(cost.compute_time_s({Kernel::residual_add, Precision::fp32, 1e3, 50e9, {}}) == test::rel(0.5));
  // The optimizer update uses its own bandwidth.
  DeviceProfile slow_opt = cost.device();
  slow_opt.optimizer_memory_bandwidth_Bps = 25e9;
  const RooflineCostModel with_slow_opt(slow_opt);
  CHECK(with_slow_opt.compute_time_s({Kernel::adam, Precision::fp32, 1e3, 50e9, {}}) == test::rel(2.0));
  CHECK(with_slow_opt.compute_time_s({Kernel::residual_add, Precision::fp32, 1e3, 50e9, {}}) == test::rel(0.5));
  // No peak (fp64 missing) or no GEMM efficiency throws.
  CHECK_THROWS_AS(cost.compute_time_s({Kernel::gemm, Precision::fp64, 1, 0, {}}), std::invalid_argument);
  DeviceProfile d;
  d.name = "no-eff";
  d.peak_flops_per_s = {{Precision::fp32, 1e12}};
  d.memory_bandwidth_Bps = 1e9;
  d.optimizer_memory_bandwidth_Bps = 1e9;
  const RooflineCostModel no_eff(d);
  CHECK_THROWS_AS(no_eff.compute_time_s({Kernel::gemm, Precision::fp32, 1, 0, {}}), std::invalid_argument);
  CHECK(no_eff.compute_time_s({Kernel::residual_add, Precision::fp32, 1e12, 0, {}}) == test::rel(1.0));
  d.memory_bandwidth_Bps = 0;
  CHECK_THROWS_AS(RooflineCostModel{d}, std::invalid_argument);
  d.memory_bandwidth_Bps = 1e9;
  d.optimizer_memory_bandwidth_Bps = 0;
  CHECK_THROWS_AS(RooflineCostModel{d}, std::invalid_argument);
}

TEST_CASE("cost model sim: one fp32 GEMM op takes F over P times e") {
  const double F = 3.2e12, P = 2e12, e = 0.8;  // = 2 s
  Workload w;
  w.rank_count = 1;
  w.node_of_rank = {0};
  w.class_of_rank = {0};
  add_op(w.programs[0], Op{"gemm", "gemm", Phase::forward, ComputeWork{Kernel::gemm, Precision::fp32, F, 1e3, {}}}, {});
  const test::StarNetwork net(1, kB, kL);
  const RooflineCostModel cost = test_cost_model();
  const SimResult res = simulate(w, net, cost, EngineOptions{Fidelity::exhaustive});
  CHECK(res.step_time_s == test::rel(F / (P * e), 1e-9));
  REQUIRE(res.ranks.size() == 1);
  CHECK(res.ranks[0].ops[0].ready_s == 0);
  CHECK(res.ranks[0].ops[0].end_s == test::rel(F / (P * e), 1e-9));
  CHECK(res.stats.compute_activities == 1);  // one compute unit per node
  CHECK(res.stats.flows == 0);
}

// A run of compute ops, each the one successor of the one before, is one timer of their summed
// seconds; each op's ready and end times are still its own (1 s, 2 s, a free op, 0.5 s).
TEST_CASE("cost model sim: a run of chained GEMM ops is one compute activity with each op's times") {
  const double P = 2e12, e = 0.8, per_s = P * e;
  Workload w;
  w.rank_count = 1;
  w.node_of_rank = {0};
  w.class_of_rank = {0};
  auto gemm = [&](const char* name, double seconds, std::vector<OpId> deps) {
    return add_op(w.programs[0], Op{name, "gemm", Phase::forward, ComputeWork{Kernel::gemm, Precision::fp32, seconds * per_s, 0, {}}},
                  deps);
  };
  const OpId a = gemm("a", 1, {});
  const OpId b = gemm("b", 2, {a});
  const OpId c = gemm("c", 0, {b});
  gemm("d", 0.5, {c});
  const test::StarNetwork net(1, kB, kL);
  const RooflineCostModel cost = test_cost_model();
  const SimResult res = simulate(w, net, cost, EngineOptions{Fidelity::exhaustive});
  CHECK(res.stats.compute_activities == 1);
  const double ready[] = {0, 1, 3, 3}, end[] = {1, 3, 3, 3.5};
  for (int v = 0; v < 4; ++v) {
    CHECK(res.ranks[0].ops[v].ready_s == test::rel(ready[v], 1e-9));
    CHECK(res.ranks[0].ops[v].end_s == test::rel(end[v], 1e-9));
  }
  CHECK(res.step_time_s == test::rel(3.5, 1e-9));
}

// Two compute ops that the graph does not order share the rank's compute units: the engine
// must not take its shortcut of a delay per op (valid only when compute ops form a chain).
TEST_CASE("cost model sim: two unordered GEMM ops share the compute units and end together") {
  const double F = 3.2e12, P = 2e12, e = 0.8;  // 2 s each alone
  Workload w;
  w.rank_count = 1;
  w.node_of_rank = {0};
  w.class_of_rank = {0};
  for (const char* name : {"a", "b"})
    add_op(w.programs[0], Op{name, name, Phase::forward, ComputeWork{Kernel::gemm, Precision::fp32, F, 1e3, {}}}, {});
  const test::StarNetwork net(1, kB, kL);
  const RooflineCostModel cost = test_cost_model();
  const SimResult res = simulate(w, net, cost, EngineOptions{Fidelity::exhaustive});
  CHECK(res.step_time_s == test::rel(2 * F / (P * e), 1e-9));
  REQUIRE(res.ranks.size() == 1);
  for (const auto& op : res.ranks[0].ops) CHECK(op.end_s == test::rel(2 * F / (P * e), 1e-9));
}

TEST_CASE("cost model sim: a memory-bound op then a GEMM take bytes over bandwidth plus F over P times e") {
  const double bytes = 30e9, BW = 100e9;    // 0.3 s (its flops at peak would take 1e-6 s)
  const double F = 0.8e12, P = 8e12, e = 0.5;  // fp16: 0.2 s
  Workload w;
  w.rank_count = 1;
  w.node_of_rank = {0};
  w.class_of_rank = {0};
  const OpId a = add_op(w.programs[0], Op{"mem", "mem", Phase::forward,
                                    ComputeWork{Kernel::residual_add, Precision::fp32, 2e6, bytes, {}}}, {});
  add_op(w.programs[0], Op{"gemm", "gemm", Phase::backward, ComputeWork{Kernel::gemm, Precision::fp16, F, 0, {}}}, {a});
  const test::StarNetwork net(1, kB, kL);
  const RooflineCostModel cost = test_cost_model();
  const SimResult res = simulate(w, net, cost, EngineOptions{Fidelity::folded});
  REQUIRE(res.ranks.size() == 1);
  const auto& ops = res.ranks[0].ops;
  CHECK(ops[0].end_s == test::rel(bytes / BW, 1e-9));
  CHECK(ops[1].ready_s == test::rel(bytes / BW, 1e-9));
  CHECK(res.step_time_s == test::rel(bytes / BW + F / (P * e), 1e-9));
}
