// NCCL's double binary tree all-reduce (collectives.hpp's tree): its trees and steps by hand, and
// simulated on an ideal 4-node x 8-GPU machine (tests/unit/ideal_machine.hpp) with NCCL-like step
// latencies (alpha_nv inside a node, alpha_net between nodes): one chunk's tree all-reduce is the
// chain up, log2(4) = 2 network hops up, 2 down and the chain down, 2 (7 alpha_nv + 2 alpha_net);
// the bandwidth term pipelines the chunks. One simulation per TEST_CASE (SimGrid: one engine per process).
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/unit/approx.hpp"
#include "tests/unit/ideal_machine.hpp"
#include "sim/analytic.hpp"
#include "sim/collectives.hpp"
#include "sim/engine.hpp"
#include "topologies/fat_tree.hpp"
#include "topologies/inner_level_classes.hpp"
#include "topologies/nccl_tuning.hpp"

using namespace exasim;

namespace {

constexpr double kAlphaNv = 1e-6, kAlphaNet = 5e-6;  // step latencies of the ideal machine

CollectiveWork tree_all_reduce(double bytes, int chunks) {
  CollectiveWork c{CollectiveKind::all_reduce, CollectiveAlgorithm::tree, "all", bytes};
  c.tree_members_per_node = 8;
  c.tree_chunks = chunks;
  return c;
}

MachineSpec machine(double nvlink_Bps, double nic_Bps) {
  MachineSpec m = test::ideal_gpu_cluster(4, 8, 1, nvlink_Bps, nic_Bps);
  m.gpu.nvlink_step_latency_s = kAlphaNv;
  m.gpu.network_step_latency_s = kAlphaNet;
  return m;
}

Workload workload(const MachineSpec& m, const CollectiveWork& c) {
  Workload w = test::one_collective_workload(32, c, Phase::optimizer, "ar");
  split_classes_at_inner_level(w, m.devices_per_inner_level());
  return w;
}

double simulated(const MachineSpec& m, const CollectiveWork& c, Fidelity fid) {
  const FatTreeNetwork net(m, Precision::fp32);
  const RooflineCostModel cost(device_profile_of(m));
  return simulate(workload(m, c), net, cost, EngineOptions{fid}).step_time_s;
}

double estimated(const MachineSpec& m, const CollectiveWork& c) {
  const FatTreeNetwork net(m, Precision::fp32);
  const RooflineCostModel cost(device_profile_of(m));
  return estimate_step(workload(m, c), net, cost).step_time_s;
}

}  // namespace

// ncclGetDtree over 4 nodes: tree 0 is 0 -> 2 -> {1, 3}; tree 1 its mirror 3 -> 1 -> {2, 0}. Each node
// is interior in at most one of them.
TEST_CASE("nccl tree schedule: the double binary tree over 4 nodes and its steps, by hand") {
  const double B = 16 * 4e6;
  const CollectiveSchedule s(CollectiveKind::all_reduce, CollectiveAlgorithm::tree, 32, B, 8, 1);
  CHECK(s.tree_node_parent(0, 0) == -1);
  CHECK(s.tree_node_parent(0, 2) == 0);
  CHECK(s.tree_node_parent(0, 1) == 2);
  CHECK(s.tree_node_parent(0, 3) == 2);
  CHECK(s.tree_node_parent(1, 3) == -1);
  CHECK(s.tree_node_parent(1, 1) == 3);
  CHECK(s.tree_node_parent(1, 2) == 1);
  CHECK(s.tree_node_parent(1, 0) == 1);
  CHECK(s.tree_height() == 7 + 2);   // the chain of 8, then 2 levels of nodes
  CHECK(s.step_count() == 2 * (1 + 9 - 1));
  // 16 channels of B / 16, one chunk each. Step 0: every member sends up the chain the 2 channels
  // (one per tree) whose tail it is: member 7 those headed at offset 0, to member 6; it receives
  // from member 0, the tail of the channels headed at offset 1.
  CollectiveStep st;
  s.step(7, 0, st);
  REQUIRE(st.sends.size() == 1);
  CHECK(st.sends[0].peer == 6);
  CHECK(st.sends[0].bytes == test::rel(2 * B / 16));
  CHECK(st.recv_from == std::vector<int>{0});
  // step 7: the heads of leaf nodes send their channel up across the network: member 8 (node 1,
  // offset 0; a leaf of tree 0) to node 2's member 16; nodes 2 and 0, the leaves of tree 1 under
  // node 1, send theirs to member 8
  s.step(8, 7, st);
  REQUIRE(st.sends.size() == 1);
  CHECK(st.sends[0].peer == 16);
  CHECK(st.sends[0].bytes == test::rel(B / 16));
  CHECK(st.recv_from == std::vector<int>{16, 0});
  // step 8: node 2's head of channel 0 passes it to the root of tree 0 (node 0), having received
  // node 1's and node 3's in step 7
  s.step(16, 8, st);
  REQUIRE(st.sends.size() == 1);
  CHECK(st.sends[0].peer == 0);
  s.step(0, 8, st);
  CHECK(st.sends.empty());
  CHECK(st.recv_from == std::vector<int>{16});
  // largest flows: 14 chunks on the chain, 2 across (a member heads one channel of each tree)
  CHECK(s.tree_within_node_flow_bytes() == test::rel(14 * B / 16));
  CHECK(s.tree_between_nodes_flow_bytes() == test::rel(2 * B / 16));
  CHECK_THROWS_AS(CollectiveSchedule(CollectiveKind::reduce_scatter, CollectiveAlgorithm::tree, 32, B, 8, 1),
                  std::invalid_argument);
  CHECK_THROWS_AS(CollectiveSchedule(CollectiveKind::all_reduce, CollectiveAlgorithm::tree, 32, B, 8, 0),
                  std::invalid_argument);
}

// Every flow of every step has its receive, and every receive its flow (what the exhaustive run needs).
TEST_CASE("nccl tree schedule: sends and receives match in every step (4 x 8, 3 x 2, 5 x 1)") {
  for (auto [n, L, C] : {std::tuple{32, 8, 3}, {6, 2, 2}, {5, 1, 4}}) {
    const CollectiveSchedule s(CollectiveKind::all_reduce, CollectiveAlgorithm::tree, n, 1e6, L, C);
    CollectiveStep st;
    double sent = 0;
    for (int k = 0; k < s.step_count(); ++k) {
      std::vector<int> sends_to(n * n, 0), recvs(n * n, 0);
      for (int m = 0; m < n; ++m) {
        s.step(m, k, st);
        for (const auto& snd : st.sends) sends_to[m * n + snd.peer]++, sent += snd.bytes;
        for (int from : st.recv_from) recvs[from * n + m]++;
      }
      CHECK(sends_to == recvs);
    }
    // every channel's every chunk goes up every edge of its tree once and down once
    CHECK(sent == test::rel(2.0 * (n - 1) * 1e6));
  }
}

// One chunk, negligible bytes: the reduce climbs the chain (7 alpha_nv) and 2 network levels, the
// broadcast comes back down: 2 (7 alpha_nv + 2 alpha_net) = 34 us.
TEST_CASE("nccl tree sim: 4 x 8, one chunk, exhaustive = chain + 2 log2(nodes) hops, by hand") {
  const double t = simulated(machine(1e15, 1e15), tree_all_reduce(32, 1), Fidelity::exhaustive);
  const double expected = 2 * (7 * kAlphaNv + 2 * kAlphaNet);
  INFO("simulated ", t, " s, by hand ", expected, " s");
  CHECK(std::fabs(t - expected) <= 1e-3 * expected);
}

TEST_CASE("nccl tree analytic: 4 x 8, one chunk: the lockstep by hand too") {
  const double t = estimated(machine(1e15, 1e15), tree_all_reduce(32, 1));
  CHECK(t == test::rel(2 * (7 * kAlphaNv + 2 * kAlphaNet)));
}

TEST_CASE("nccl tree sim: 4 x 8, one chunk, folded = the same by hand") {
  const double t = simulated(machine(1e15, 1e15), tree_all_reduce(32, 1), Fidelity::folded);
  CHECK(t == test::rel(2 * (7 * kAlphaNv + 2 * kAlphaNet)));
}

// The pipelined bandwidth term alone (no latency, the network infinitely fast): every member
// passes 14 of the 16 channels' C chunks up its chain and 14 down, one flow a step at 100 GB/s;
// the steps sum to 2 x 14 C x chunk / NVLink = 2 B (L - 1) / L / NVLink = 1.12 ms for B = 64 MB.
namespace {
MachineSpec nvlink_only() { return test::ideal_gpu_cluster(4, 8, 1, 100e9, 1e15); }
constexpr double kPipelined = 2 * 64e6 * 7 / 8 / 100e9;
}  // namespace

TEST_CASE("nccl tree sim: 4 x 8, 16 chunks, exhaustive = the pipelined bandwidth term by hand") {
  const double t = simulated(nvlink_only(), tree_all_reduce(64e6, 16), Fidelity::exhaustive);
  CHECK(t == test::rel(kPipelined, 1e-6));
}

TEST_CASE("nccl tree sim: 4 x 8, 16 chunks, folded = the same") {
  const double t = simulated(nvlink_only(), tree_all_reduce(64e6, 16), Fidelity::folded);
  CHECK(t == test::rel(kPipelined, 1e-6));
}

// The lockstep's steps across nodes still pass their chunks through the 1e15 B/s NICs: 0.75 MB in all,
// 0.75 ns (6.7e-7 of the step; 0.75 ps with 1e18 B/s NICs), which the pipelined term by hand leaves out.
TEST_CASE("nccl tree analytic: 4 x 8, 16 chunks = the same") {
  CHECK(estimated(nvlink_only(), tree_all_reduce(64e6, 16)) == test::rel(kPipelined, 1e-6));
}

// Both at once (NIC 10 GB/s, NVLink 100 GB/s, the step latencies): the network's steps (two heads'
// chunks through one NIC, 55 us) bind. Exhaustive shares the links; folded waits for its member's end
// with the group's flows simulated alone, its members' own links (NICs, NVLink) shared max-min
// (sim/group_flows.hpp): both 2.0965 ms; analytic keeps the lockstep over uncontended paths, each flow
// at the larger of its sender's and receiver's bytes across nodes in the step: 2.0815 ms (-0.72 %);
// within the 48 steps x 55 us = 2.64 ms of every step network-bound.
constexpr double kBothExhaustive = 2.0965e-3, kBothLockstep = 2.0815e-3;

TEST_CASE("nccl tree sim: 4 x 8, 16 chunks, latencies and NICs: exhaustive") {
  const double t = simulated(machine(100e9, 10e9), tree_all_reduce(64e6, 16), Fidelity::exhaustive);
  CHECK(t == test::rel(kBothExhaustive, 1e-6));
}

TEST_CASE("nccl tree sim: 4 x 8, 16 chunks, latencies and NICs: folded = exhaustive") {
  const double t = simulated(machine(100e9, 10e9), tree_all_reduce(64e6, 16), Fidelity::folded);
  CHECK(t == test::rel(kBothExhaustive, 1e-6));
}

TEST_CASE("nccl tree analytic: 4 x 8, 16 chunks, latencies and NICs: the lockstep") {
  const double t = estimated(machine(100e9, 10e9), tree_all_reduce(64e6, 16));
  CHECK(t == test::rel(kBothLockstep, 1e-6));
}
