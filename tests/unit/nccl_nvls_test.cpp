// NCCL's NVLS all-reduce (NVLink SHARP: the NVSwitch reduces; collectives.hpp's nvls, the tuner in
// topologies/nccl_tuning.hpp) by hand: an 8-GPU H100 node (NVLink 450 GB/s a direction) and an
// all-reduce of 1 GiB. The tuner (nccl-2.7.5-nvls, read through dgx-h100's machine file): NVLS's
// latency 23 us, its bus bandwidth 8/9 of the link (a GPU's link carries n + 1 channels) x 5/6,
// against 2.7.5's Ring. The simulation: every link carries B (n+1)/n = 9/8 GiB at once, one step.
// One simulation per TEST_CASE (SimGrid: one engine per process).
#include <doctest/doctest.h>

#include <boost/range/iterator_range.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/embedded.hpp"
#include "app/scenario.hpp"
#include "sim/analytic.hpp"
#include "sim/collectives.hpp"
#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "tests/unit/approx.hpp"
#include "tests/unit/ideal_machine.hpp"
#include "tests/unit/small_scenario.hpp"
#include "topologies/fat_tree.hpp"
#include "topologies/inner_level_classes.hpp"
#include "topologies/nccl_tuning.hpp"

using namespace exasim;

namespace {

constexpr double kGiB = 1073741824.0;
constexpr double kLink = 450e9;
constexpr CollectiveKind kAR = CollectiveKind::all_reduce;

// 1 or 2 ideal nodes of 8 GPUs on a 450 GB/s NVLink with NVLink SHARP and dgx-h100's library.
MachineSpec ideal_h100_nodes(int nodes, bool sharp = true) {
  MachineSpec m = test::ideal_gpu_cluster(nodes, 8, 1, kLink, 50e9);
  m.gpu.nccl = test::parsed_machine("dgx-h100").gpu.nccl;
  m.gpu.nvlink_sharp = sharp;
  return m;
}

NcclCommunicator comm_of(const MachineSpec& m, int ranks) {
  const FatTreeNetwork net(m, Precision::fp32);
  std::vector<int> nodes;
  for (int r = 0; r < ranks; ++r) nodes.push_back(r);
  return nccl_communicator(net, m, nodes);
}

// The 8-GPU all-reduce of 1 GiB, tuned; then simulated (or estimated) on the ideal node.
double simulated_1GiB(Fidelity fid, bool analytic = false) {
  const MachineSpec m = ideal_h100_nodes(1);
  const FatTreeNetwork net(m, Precision::fp32);
  Workload w = test::one_collective_workload(8, CollectiveWork{kAR, CollectiveAlgorithm::ring, "all", kGiB},
                                             Phase::optimizer, "ar");
  split_classes_at_inner_level(w, m.devices_per_inner_level());
  REQUIRE(adopt_nccl_tuning(w, net, m) == 1);
  for (StepGraph& g : w.programs)
    for (auto v : boost::make_iterator_range(boost::vertices(g)))
      if (const auto* c = std::get_if<CollectiveWork>(&g[v].work)) REQUIRE(c->algorithm == CollectiveAlgorithm::nvls);
  const RooflineCostModel cost(device_profile_of(m));
  if (analytic) return estimate_step(w, net, cost).step_time_s;
  return simulate(w, net, cost, EngineOptions{fid}).step_time_s;
}

// One step: its latency (hwLat[NVLINK][NVLS][Simple], 23 us) and 9/8 GiB over each 450 GB/s link.
constexpr double kSimulated = 23e-6 + kGiB * 9.0 / 8.0 / kLink;  // 2.70735 ms

}  // namespace

TEST_CASE("nvls schedule: one step, each member sends B (n+1) / (n (n-1)) to every other, by hand") {
  const CollectiveSchedule s(kAR, CollectiveAlgorithm::nvls, 8, kGiB);
  CHECK(s.step_count() == 1);
  CollectiveStep st;
  s.step(3, 0, st);
  REQUIRE(st.sends.size() == 7);
  REQUIRE(st.recv_from.size() == 7);
  double sent = 0;
  for (const auto& snd : st.sends) {
    CHECK(snd.peer != 3);
    CHECK(snd.bytes == test::rel(kGiB * 9 / 56));
    sent += snd.bytes;
  }
  CHECK(sent == test::rel(kGiB * 9 / 8));  // B (n+1)/n out of each link (and into it)
  CHECK(s.alpha_beta_time_s(23e-6, kLink) == test::rel(kSimulated));
  CHECK_THROWS_AS(CollectiveSchedule(CollectiveKind::all_to_all, CollectiveAlgorithm::nvls, 8, kGiB),
                  std::invalid_argument);
}

TEST_CASE("nccl nvls tuning: the shipped library and the machines that declare NVLink SHARP") {
  const MachineSpec h100 = test::parsed_machine("dgx-h100");
  CHECK(h100.gpu.nvlink_sharp);
  CHECK(h100.gpu.nccl.name == "nccl-2.7.5-nvls");
  CHECK(h100.gpu.nccl.nvls_nvlink_latency_s == test::rel(23e-6));
  CHECK(h100.gpu.nccl.nvls_algorithm_bandwidth_ratio == test::rel(5.0 / 6.0));
  // the ring's tables are 2.7.5's, kept through "extends"
  CHECK(h100.gpu.nccl.base_latency_s[NcclTuning::ring][NcclTuning::simple] == test::rel(8.4e-6));
  CHECK(h100.gpu.nccl.tree_correction[NcclTuning::simple][11] == test::rel(0.5));
}

// NVLS: 23 us + 2^30 B / (450 x 8/9 x 5/6 = 333.3 GB/s) = 3.2442 ms. Ring/Simple (2.7.5): 8.4 + 14 x 3.4 =
// 56 us + 2^30 / (450 x 8/14 = 257.1 GB/s) = 4.2316 ms. Ring/LL: 3.6 + 14 x 0.47 = 10.18 us, 450/4 x 8/14
// = 64.29 GB/s. LL against NVLS: equal at 12.82 us / (1/64.29 - 1/333.3 GB/s) = 1.021 MB.
TEST_CASE("nccl nvls tuning: an 8-GPU H100 all-reduce of 1 GiB against its closed form") {
  const MachineSpec m = ideal_h100_nodes(1);
  const NcclCommunicator comm = comm_of(m, 8);
  CHECK(comm.nodes == 1);
  CHECK(comm.nvls);
  const NcclTuning& t = m.gpu.nccl;
  const NcclCost nvls = nccl_cost(t, kAR, NcclTuning::nvls, NcclTuning::simple, comm, kGiB);
  CHECK(nvls.latency_s == test::rel(23e-6));
  CHECK(nvls.bandwidth_Bps == test::rel(kLink * 8 / 9 * 5 / 6));
  CHECK(nvls.time_s == test::rel(23e-6 + kGiB / 333.333333e9));
  CHECK(nccl_cost(t, kAR, NcclTuning::nvls, NcclTuning::ll, comm, kGiB).time_s < 0);  // Simple only
  const NcclCost ring = nccl_cost(t, kAR, NcclTuning::ring, NcclTuning::simple, comm, kGiB);
  CHECK(ring.time_s == test::rel(56e-6 + kGiB / (kLink * 8 / 14)));
  const NcclCost big = nccl_choose(t, kAR, comm, kGiB, false);
  CHECK(big.algorithm == NcclTuning::nvls);
  CHECK(big.protocol == NcclTuning::simple);
  CHECK(nccl_choose(t, kAR, comm, 0.9e6, false).algorithm == NcclTuning::ring);  // LL below 1.021 MB
  CHECK(nccl_choose(t, kAR, comm, 0.9e6, false).protocol == NcclTuning::ll);
  CHECK(nccl_choose(t, kAR, comm, 1.2e6, false).algorithm == NcclTuning::nvls);
}

TEST_CASE("nccl nvls tuning: not offered without NVLink SHARP, nor across nodes") {
  CHECK_FALSE(comm_of(ideal_h100_nodes(1, false), 8).nvls);
  MachineSpec no_table = ideal_h100_nodes(1);  // the switch reduces, but 2.7.5 has no NVLS
  no_table.gpu.nccl.nvls_algorithm_bandwidth_ratio = 0;
  CHECK_FALSE(comm_of(no_table, 8).nvls);
  CHECK(nccl_choose(ideal_h100_nodes(1, false).gpu.nccl, kAR, comm_of(ideal_h100_nodes(1, false), 8), kGiB, false)
            .algorithm == NcclTuning::ring);
  CHECK_FALSE(comm_of(ideal_h100_nodes(2), 16).nvls);
}

TEST_CASE("nccl nvls sim: the tuned 1 GiB all-reduce on one node, exhaustive") {
  // Exhaustive's flows share links in SimGrid's max-min solver, whose rounding ends them 4.4 ps (1.6e-9) early.
  CHECK(simulated_1GiB(Fidelity::exhaustive) == test::rel(kSimulated, 1e-8));
}

TEST_CASE("nccl nvls sim: the tuned 1 GiB all-reduce on one node, folded the same") {
  CHECK(simulated_1GiB(Fidelity::folded) == test::rel(kSimulated, 1e-9));
}

TEST_CASE("nccl nvls sim: the tuned 1 GiB all-reduce on one node, analytic the same") {
  CHECK(simulated_1GiB(Fidelity::folded, true) == test::rel(kSimulated, 1e-9));
}

// The library's nvls table and its "extends" are read as one file at the machine's path.
TEST_CASE("nccl nvls tuning: an inline library's bad nvls value or unknown base is refused at its path") {
  nlohmann::json lib = nlohmann::json::parse(embedded_files().at("topologies/libraries/nccl-2.7.5-nvls.json"));
  lib["nvls"]["algorithm_bandwidth_ratio"] = 1.5;
  nlohmann::json m = nlohmann::json::parse(embedded_files().at("topologies/machines/dgx-h100.json"));
  m["collective_library"] = lib;
  nlohmann::json j = test::small_gpt_on(m);
  auto refused_at = [&]() -> std::string {
    try {
      (void)parse_scenario(j.dump(), "n.json");
    } catch (const ScenarioError& e) {
      return e.json_path();
    }
    return "";
  };
  CHECK(refused_at() == "/machine/collective_library/nvls/algorithm_bandwidth_ratio");
  lib["nvls"]["algorithm_bandwidth_ratio"] = 0.5;
  lib["extends"] = "nccl-0.0";
  j["machine"]["collective_library"] = lib;
  CHECK(refused_at() == "/machine/collective_library/extends");
}
