// The multi-ring (NCCL's channels, one leaving each node through each NIC): its steps and
// alpha-beta time by hand, which groups adopt_multi_ring_collectives gives it, and simulated
// on a fat tree without latencies: two nodes of 4 GPUs reduce 4 x faster across nodes than
// with the flat ring, and folded and exhaustive runs both meet the closed form.
// One simulation per TEST_CASE (SimGrid: one engine per process).
#include <doctest/doctest.h>

#include <boost/range/iterator_range.hpp>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "tests/unit/approx.hpp"
#include "tests/unit/ideal_machine.hpp"
#include "sim/analytic.hpp"
#include "sim/collectives.hpp"
#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/workload.hpp"
#include "topologies/fat_tree.hpp"
#include "topologies/inner_level_classes.hpp"
#include "topologies/machine_spec.hpp"

using namespace exasim;

namespace {

constexpr double kNvlink = 100e9;
constexpr double kNic = 10e9;

// `nodes` nodes of `gpus` GPUs (tests/unit/ideal_machine.hpp): no latency anywhere.
MachineSpec cluster(int nodes, int gpus, int gpus_per_nic = 1) {
  return test::ideal_gpu_cluster(nodes, gpus, gpus_per_nic, kNvlink, kNic);
}

// One ring all-reduce over every GPU (rank r on GPU r), ranks in one class split at the node (as
// `run` did before it split after adopting the collectives), the multi-ring adopted when `adopt`.
Workload one_all_reduce(const FatTreeNetwork& net, const MachineSpec& m, double bytes, bool adopt) {
  Workload w = test::one_collective_workload(
      net.node_count(), CollectiveWork{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "all", bytes},
      Phase::optimizer, "ar");
  split_classes_at_inner_level(w, m.devices_per_inner_level());
  if (adopt) CHECK(adopt_multi_ring_collectives(w, net) == 1);
  return w;
}

double simulated(int nodes, int gpus, double bytes, bool adopt, Fidelity fid) {
  const MachineSpec m = cluster(nodes, gpus);
  const FatTreeNetwork net(m, Precision::fp32);
  const Workload w = one_all_reduce(net, m, bytes, adopt);
  const RooflineCostModel cost(device_profile_of(m));
  return simulate(w, net, cost, EngineOptions{fid}).step_time_s;
}

// The multi-ring all-reduce over `nodes` x `gpus`: 2(n-1) steps, each bound by the NIC, which
// carries one channel's chunk B / (n L) (the NVLink flow's (L-1) B / (n L) at 10 x the bandwidth
// is faster while L < 11).
double multi_ring_closed_form(int nodes, int gpus, double bytes) {
  const int n = nodes * gpus;
  return 2 * (n - 1) * (bytes / n / gpus / kNic);
}

}  // namespace

TEST_CASE("multi_ring schedule: L-1 channels to the next member of the block, one to the next block") {
  const double B = 32e6;
  // 8 members in 2 blocks of 4: member 3 is (block 0, offset 3).
  const CollectiveSchedule s(CollectiveKind::all_reduce, CollectiveAlgorithm::multi_ring, 8, B, 4);
  CHECK(s.step_count() == 14);
  CHECK(s.messages_per_member() == 14);
  CollectiveStep st;
  s.step(3, 5, st);
  REQUIRE(st.sends.size() == 2);
  CHECK(st.sends[0].peer == 0);  // the channels that stay in block 0: offset 3 -> 0
  CHECK(st.sends[0].bytes == test::rel(3 * B / 32));
  CHECK(st.sends[1].peer == 4);  // channel 0 leaves block 0 from offset 3, enters block 1 at 0
  CHECK(st.sends[1].bytes == test::rel(B / 32));
  CHECK(st.recv_from == std::vector<int>{2, 6});
  // member 5 = (block 1, offset 1): to 6 inside, to (block 0, offset 2) = 2 across
  s.step(5, 0, st);
  CHECK(st.sends[0].peer == 6);
  CHECK(st.sends[1].peer == 2);
  CHECK(st.recv_from == std::vector<int>{4, 0});
  // alpha-beta: 14 steps, each bound by the larger flow, 3 B / 32
  CHECK(s.alpha_beta_time_s(1e-6, 1e9) == test::rel(14 * (1e-6 + 3 * B / 32 / 1e9)));
  const CollectiveSchedule rs(CollectiveKind::reduce_scatter, CollectiveAlgorithm::multi_ring, 8, B, 4);
  CHECK(rs.step_count() == 7);
  CHECK(rs.alpha_beta_time_s(0, 1e9) == test::rel(7 * 3 * B / 32 / 1e9));
  // two blocks of 2: both flows carry one channel's chunk B / (n L)
  const CollectiveSchedule ag(CollectiveKind::all_gather, CollectiveAlgorithm::multi_ring, 4, B, 2);
  CHECK(ag.alpha_beta_time_s(0, 1e9) == test::rel(3 * B / 8 / 1e9));
  // one block: the plain ring
  const CollectiveSchedule one(CollectiveKind::all_reduce, CollectiveAlgorithm::multi_ring, 4, B, 4);
  one.step(1, 0, st);
  REQUIRE(st.sends.size() == 1);
  CHECK(st.sends[0].peer == 2);
  CHECK(st.sends[0].bytes == test::rel(B / 4));
  CHECK(one.alpha_beta_time_s(0, 1e9) ==
        test::rel(CollectiveSchedule(CollectiveKind::all_reduce, CollectiveAlgorithm::ring, 4, B)
                            .alpha_beta_time_s(0, 1e9)));
  CHECK_THROWS_AS(CollectiveSchedule(CollectiveKind::all_to_all, CollectiveAlgorithm::multi_ring, 8, B, 4),
                  std::invalid_argument);
  CHECK_THROWS_AS(CollectiveSchedule(CollectiveKind::all_reduce, CollectiveAlgorithm::multi_ring, 8, B, 3),
                  std::invalid_argument);
}

TEST_CASE("multi_ring_block: several members per node on several NICs, and only then") {
  const FatTreeNetwork net(cluster(4, 4), Precision::fp32);
  CHECK(multi_ring_block(net, {0, 1, 2, 3, 4, 5, 6, 7}) == 4);   // two nodes of 4
  CHECK(multi_ring_block(net, {0, 1, 4, 5, 8, 9, 12, 13}) == 2);  // 2 per node
  CHECK(multi_ring_block(net, {0, 4, 8, 12}) == 0);               // one per node: the ring
  CHECK(multi_ring_block(net, {0, 1, 2, 3}) == 0);                // one node: the ring
  CHECK(multi_ring_block(net, {0, 1, 4, 5, 6, 7}) == 0);          // uneven blocks
  CHECK(multi_ring_block(net, {0, 1, 4, 5, 2, 3}) == 0);          // node 0 twice
  const FatTreeNetwork one_nic(cluster(4, 4, 4), Precision::fp32);
  CHECK(multi_ring_block(one_nic, {0, 1, 2, 3, 4, 5, 6, 7}) == 0);  // one NIC per node: the ring
  const FatTreeNetwork two_nics(cluster(4, 4, 2), Precision::fp32);
  CHECK(multi_ring_block(two_nics, {0, 1, 2, 3, 4, 5, 6, 7}) == 4);
}

TEST_CASE("adopt_multi_ring_collectives: the data-parallel groups over nodes, not the ones inside a node") {
  const FatTreeNetwork net(cluster(2, 4), Precision::fp32);
  Workload w;
  w.rank_count = 8;
  for (int r = 0; r < 8; ++r) w.node_of_rank.push_back(r);
  GroupTable dp, tp, pp;
  dp.members = {{0, 1, 4, 5}, {2, 3, 6, 7}};  // 2 per node
  tp.members = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  pp.members = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  for (GroupTable* t : {&dp, &tp, &pp}) t->index(8);
  w.groups = {{"dp", dp}, {"tp", tp}, {"pp", pp}};
  StepGraph& g = w.programs[0];
  add_op(g, Op{"a", "a", Phase::optimizer, CollectiveWork{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "dp", 1e6}}, {});
  add_op(g, Op{"b", "b", Phase::optimizer, CollectiveWork{CollectiveKind::all_gather, CollectiveAlgorithm::ring, "dp", 1e6}}, {});
  add_op(g, Op{"c", "c", Phase::forward, CollectiveWork{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "tp", 1e6}}, {});
  add_op(g, Op{"d", "d", Phase::forward, CollectiveWork{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "pp", 1e6}}, {});
  add_op(g, Op{"e", "e", Phase::forward, CollectiveWork{CollectiveKind::all_to_all, CollectiveAlgorithm::pairwise, "dp", 1e6}}, {});
  CHECK(adopt_multi_ring_collectives(w, net) == 2);
  CHECK(w.groups["dp"].block_size == 2);
  CHECK(w.groups["tp"].block_size == 1);
  CHECK(w.groups["pp"].block_size == 1);
  std::vector<CollectiveAlgorithm> algos;
  for (auto v : boost::make_iterator_range(boost::vertices(g))) algos.push_back(std::get<CollectiveWork>(g[v].work).algorithm);
  CHECK(algos == std::vector<CollectiveAlgorithm>{CollectiveAlgorithm::multi_ring, CollectiveAlgorithm::multi_ring,
                                                  CollectiveAlgorithm::ring, CollectiveAlgorithm::ring,
                                                  CollectiveAlgorithm::pairwise});
}

// Two nodes of 4 GPUs: the flat ring's 14 steps each wait for one NIC carrying B / 8; the
// multi-ring's for four NICs at once, each carrying B / 32: 4 x faster.
TEST_CASE("multi_ring sim: 2 nodes x 4 GPUs, the flat ring all_reduce waits for one NIC per step") {
  const double bytes = 32 * 4e6;
  const double t = simulated(2, 4, bytes, false, Fidelity::exhaustive);
  const double expected = 14 * (bytes / 8 / kNic);
  INFO("simulated ", t, " s, closed form ", expected, " s");
  CHECK(std::fabs(t - expected) <= 1e-6 * expected);
}

TEST_CASE("multi_ring sim: 2 nodes x 4 GPUs, the multi-ring all_reduce is 4 x faster than the flat ring") {
  const double bytes = 32 * 4e6;
  const double t = simulated(2, 4, bytes, true, Fidelity::exhaustive);
  const double expected = multi_ring_closed_form(2, 4, bytes);
  CHECK(expected == test::rel(14 * (bytes / 8 / kNic) / 4));
  INFO("simulated ", t, " s, closed form ", expected, " s");
  CHECK(std::fabs(t - expected) <= 1e-6 * expected);
}

// 4 nodes of 4 GPUs over two leaf groups: the flows that cross nodes go rail j -> rail j+1, up
// and down the leaves (two per rail leaf uplink of 2 NICs: not slowed). Folded and exhaustive
// runs meet the same closed form.
TEST_CASE("multi_ring sim: 4 nodes x 4 GPUs, exhaustive all_reduce meets the closed form") {
  const double bytes = 64 * 4e6;
  const double t = simulated(4, 4, bytes, true, Fidelity::exhaustive);
  const double expected = multi_ring_closed_form(4, 4, bytes);
  INFO("simulated ", t, " s, closed form ", expected, " s");
  CHECK(std::fabs(t - expected) <= 1e-6 * expected);
}

TEST_CASE("multi_ring sim: 4 nodes x 4 GPUs, folded all_reduce meets the same closed form") {
  const double bytes = 64 * 4e6;
  const double t = simulated(4, 4, bytes, true, Fidelity::folded);
  const double expected = multi_ring_closed_form(4, 4, bytes);
  INFO("simulated ", t, " s, closed form ", expected, " s");
  CHECK(std::fabs(t - expected) <= 1e-6 * expected);
}

// As `run` does now: the classes are split at the node only once the collectives are adopted, and
// a role that runs only multi-ring collectives does not split them (every member sends one flow
// inside its block and one across, whatever its offset): one representative for all 16 ranks.
TEST_CASE("multi_ring sim: 4 nodes x 4 GPUs, one class kept after the multi-ring, folded meets the closed form") {
  const MachineSpec m = cluster(4, 4);
  const FatTreeNetwork net(m, Precision::fp32);
  const double bytes = 64 * 4e6;
  Workload w = test::one_collective_workload(
      16, CollectiveWork{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "all", bytes}, Phase::optimizer, "ar");
  REQUIRE(adopt_multi_ring_collectives(w, net) == 1);
  CHECK_FALSE(split_classes_at_inner_level(w, m.devices_per_inner_level()));
  const RooflineCostModel cost(device_profile_of(m));
  const SimResult res = simulate(w, net, cost, EngineOptions{Fidelity::folded});
  CHECK(res.stats.simulated_ranks == 1);
  const double expected = multi_ring_closed_form(4, 4, bytes);
  INFO("simulated ", res.step_time_s, " s, closed form ", expected, " s");
  CHECK(std::fabs(res.step_time_s - expected) <= 1e-6 * expected);
}

TEST_CASE("inner-level classes: a straddling role splits them unless every op over it is a multi-ring collective") {
  const FatTreeNetwork net(cluster(4, 4), Precision::fp32);
  Workload w;
  w.rank_count = 16;
  for (int r = 0; r < 16; ++r) {
    w.node_of_rank.push_back(r);
    w.class_of_rank.push_back(0);
  }
  GroupTable dp;
  dp.members = {{0, 1, 4, 5, 8, 9, 12, 13}, {2, 3, 6, 7, 10, 11, 14, 15}};  // 2 per node: 0 -> 1 inside, 1 -> 4 across
  dp.index(16);
  w.groups["dp"] = dp;
  CHECK_FALSE(groups_straddle_inner_levels(w, 4));  // no op over dp yet: nothing tells its ranks apart
  add_op(w.programs[0], Op{"ar", "ar", Phase::optimizer, CollectiveWork{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "dp", 1e6}}, {});
  CHECK(groups_straddle_inner_levels(w, 4));  // the ring: offset 1 sends across, offset 0 inside
  REQUIRE(adopt_multi_ring_collectives(w, net) == 1);
  CHECK(role_runs_only_multi_ring(w, "dp"));
  CHECK_FALSE(groups_straddle_inner_levels(w, 4));
  Workload with_transfer = w;  // a point-to-point transfer over the role: its peer's offset matters
  add_op(with_transfer.programs[0], Op{"s", "s", Phase::forward, TransferWork{TransferWork::Direction::send, "dp", 1, 1e6, 1}}, {});
  CHECK_FALSE(role_runs_only_multi_ring(with_transfer, "dp"));
  CHECK(split_classes_at_inner_level(with_transfer, 4));
  CHECK(with_transfer.class_of_rank[5] == 1);  // (class 0, offset 1)
  Workload with_all_to_all = w;  // an all-to-all over it keeps its own algorithm
  add_op(with_all_to_all.programs[0], Op{"a", "a", Phase::forward, CollectiveWork{CollectiveKind::all_to_all, CollectiveAlgorithm::pairwise, "dp", 1e6}}, {});
  CHECK(groups_straddle_inner_levels(with_all_to_all, 4));
  CHECK_FALSE(split_classes_at_inner_level(w, 4));
  CHECK(w.class_of_rank == std::vector<int>(16, 0));
}

// The analytic estimate: each step the slower of the NVLink flow (3 channels' chunks at 100 GB/s)
// and the NIC flow (one channel's chunk at 10 GB/s), here the NIC: the simulated closed form.
TEST_CASE("multi_ring analytic: 2 nodes x 4 GPUs, the estimate is the NIC-bound closed form") {
  const MachineSpec m = cluster(2, 4);
  const FatTreeNetwork net(m, Precision::fp32);
  const double bytes = 32 * 4e6;
  const Workload w = one_all_reduce(net, m, bytes, true);
  const RooflineCostModel cost(device_profile_of(m));
  const double t = estimate_step(w, net, cost).step_time_s;
  const double expected = multi_ring_closed_form(2, 4, bytes) + 14 * net.message_overhead_s();
  INFO("estimated ", t, " s, closed form ", expected, " s");
  CHECK(std::fabs(t - expected) <= 1e-9 * expected);
}

// NCCL's per-step software latency by hop kind (FatTreeNetwork::message_latency_s; NCCL 2.7.5's
// tuning.cc hwLat, Ring/Simple: 3.4 us over NVLink, 9.6 us over the network). On 2 nodes x 8 GPUs
// the multi-ring's step sends one NVLink flow (7 channels' chunks, 4e6 B each: 3.4 us + 280 us)
// and one NIC flow (one chunk: 9.6 us + 400 us) at once; the NIC flow sets each of the 2(n-1) = 30
// steps: 30 x (9.6 us + 400 us) = 12.288 ms, the latency term 30 x 9.6 us = 288 us.
namespace {

constexpr double kNvlinkStep = 3.4e-6, kNetworkStep = 9.6e-6;

MachineSpec cluster_with_step_latencies() {
  MachineSpec m = cluster(2, 8);
  m.gpu.nvlink_step_latency_s = kNvlinkStep;
  m.gpu.network_step_latency_s = kNetworkStep;
  return m;
}

constexpr double kStepBytes = 16 * 8 * 4e6;  // B: a channel's chunk B / (n L) = 4e6 B
constexpr double kStepLatencyExpected = 30 * (9.6e-6 + 4e6 / kNic);

double simulated_with_step_latencies(Fidelity fid) {
  const MachineSpec m = cluster_with_step_latencies();
  const FatTreeNetwork net(m, Precision::fp32);
  const Workload w = one_all_reduce(net, m, kStepBytes, true);
  const RooflineCostModel cost(device_profile_of(m));
  return simulate(w, net, cost, EngineOptions{fid}).step_time_s;
}

}  // namespace

TEST_CASE("nccl step latency: by hop kind, NVLink inside a node, the network between nodes") {
  const MachineSpec m = cluster_with_step_latencies();
  const FatTreeNetwork net(m, Precision::fp32);
  CHECK(net.message_latency_s(0, 7) == kNvlinkStep);
  CHECK(net.message_latency_s(8, 15) == kNvlinkStep);
  CHECK(net.message_latency_s(7, 8) == kNetworkStep);
  CHECK(net.message_overhead_s() == 0);  // no serial per-sender overhead on a GPU cluster
  CHECK(FatTreeNetwork(cluster(2, 8), Precision::fp32).message_latency_s(7, 8) == 0);  // absent: not modelled
  CHECK(kStepLatencyExpected == test::rel(12.288e-3));
}

TEST_CASE("nccl step latency sim: 2 nodes x 8 GPUs, exhaustive all_reduce pays 30 network step latencies") {
  const double t = simulated_with_step_latencies(Fidelity::exhaustive);
  INFO("simulated ", t, " s, by hand ", kStepLatencyExpected, " s");
  CHECK(std::fabs(t - kStepLatencyExpected) <= 1e-9 * kStepLatencyExpected);
}

TEST_CASE("nccl step latency sim: 2 nodes x 8 GPUs, folded all_reduce pays the same") {
  const double t = simulated_with_step_latencies(Fidelity::folded);
  INFO("simulated ", t, " s, by hand ", kStepLatencyExpected, " s");
  CHECK(std::fabs(t - kStepLatencyExpected) <= 1e-9 * kStepLatencyExpected);
}

TEST_CASE("nccl step latency analytic: 2 nodes x 8 GPUs, the estimate pays the same") {
  const MachineSpec m = cluster_with_step_latencies();
  const FatTreeNetwork net(m, Precision::fp32);
  const Workload w = one_all_reduce(net, m, kStepBytes, true);
  const RooflineCostModel cost(device_profile_of(m));
  const double t = estimate_step(w, net, cost).step_time_s;
  INFO("estimated ", t, " s, by hand ", kStepLatencyExpected, " s");
  CHECK(std::fabs(t - kStepLatencyExpected) <= 1e-9 * kStepLatencyExpected);
}
