// LL128 on Hopper (nccl-2.7.5-nvls's compute_capability_90 rows, from a 2.19-2.21 tuning.cc): on for
// the H100 and H200, Ring/LL128 at most 36.7 GB/s a channel (every collective), Tree/LL128 at most
// 36.7, 36.7, 29.0 GB/s a channel by nodes 1, 2, more; 2.7.5's own rules (ll128MaxBwPerCh 16.7, 15.2,
// 18.3 GB/s, Tree x 7/9 of it) for every other device. Ideal nodes of 8 GPUs, NVLink 450 GB/s, a
// 50 GB/s NIC per GPU. By hand:
//   one node, 8 ranks, 8 channels, reduce-scatter of 1 GiB: Ring/LL128 bus min(450 x 0.92 = 414,
//     36.7 x 8 = 293.6) = 293.6 GB/s, x 8/7 = 335.54 GB/s; latency 10 + 7 x 1.9 = 23.3 us;
//     time 23.3 us + 2^30 / 335.54 GB/s = 3.2233 ms (2.7.5 on an A100-like device: 15.2 x 8 = 121.6);
//   4 nodes, 1 rank each, 1 channel, all-reduce: Ring/LL128 min(50 x 0.7 = 35, 36.7) = 35 GB/s;
//     Tree/LL128 min(min(50 x 0.9, 80) x 0.915 = 41.175, 29.0 x 1) = 29.0 GB/s (2.7.5: 16.7 x 7/9).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/embedded.hpp"
#include "app/scenario.hpp"
#include "tests/unit/approx.hpp"
#include "tests/unit/ideal_machine.hpp"
#include "tests/unit/small_scenario.hpp"
#include "topologies/fat_tree.hpp"
#include "topologies/nccl_tuning.hpp"

using namespace exasim;

namespace {

constexpr double kGiB = 1073741824.0;

MachineSpec ideal(int nodes, const char* device) {
  MachineSpec m = test::ideal_gpu_cluster(nodes, 8, 1, 450e9, 50e9);
  m.gpu.nccl = test::parsed_machine("dgx-h100").gpu.nccl;
  m.device_name = device;
  return m;
}

NcclCommunicator comm_of(const MachineSpec& m, const std::vector<int>& gpus) {
  const FatTreeNetwork net(m, Precision::fp32);
  return nccl_communicator(net, m, gpus);
}

constexpr const char* kH100 = "NVIDIA H100 SXM5 80 GB";
constexpr const char* kA100 = "NVIDIA A100 SXM4 80 GB";

}  // namespace

TEST_CASE("nccl hopper ll128: the shipped library enables LL128 on the H100 and H200 only through its 9.0 rows") {
  const MachineSpec h100 = ideal(1, kH100);
  const auto& cc90 = h100.gpu.nccl.compute_capability_90_devices;
  REQUIRE(cc90.size() == 2);
  CHECK(cc90[0] == kH100);
  CHECK(cc90[1] == "NVIDIA H200 SXM 141 GB");
  CHECK(h100.gpu.nccl.compute_capability_90_ring_ll128_max_channel_Bps == test::rel(36.7e9));
  CHECK(h100.gpu.nccl.compute_capability_90_tree_ll128_max_channel_Bps[2] == test::rel(29.0e9));
  const NcclCommunicator c = comm_of(h100, {0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(c.compute_capability_90);
  CHECK(c.ll128_enabled);
  // NCCL 2.7.5's own library (the A100 and V100 machines) has no 9.0 rows: the H100 keeps LL128 off
  MachineSpec old = h100;
  old.gpu.nccl = test::parsed_machine("selene-dgx-a100").gpu.nccl;
  CHECK(old.gpu.nccl.compute_capability_90_devices.empty());
  CHECK_FALSE(comm_of(old, {0, 1, 2, 3, 4, 5, 6, 7}).ll128_enabled);
}

TEST_CASE("nccl hopper ll128: an 8-GPU H100 reduce-scatter of 1 GiB against its closed form") {
  const MachineSpec m = ideal(1, kH100);
  const NcclCommunicator comm = comm_of(m, {0, 1, 2, 3, 4, 5, 6, 7});
  const NcclTuning& t = m.gpu.nccl;
  const auto rs = CollectiveKind::reduce_scatter;
  CHECK(nccl_bus_Bps(t, rs, NcclTuning::ring, NcclTuning::ll128, comm) == test::rel(293.6e9));
  const NcclCost c = nccl_cost(t, rs, NcclTuning::ring, NcclTuning::ll128, comm, kGiB);
  CHECK(c.latency_s == test::rel(23.3e-6));
  CHECK(c.bandwidth_Bps == test::rel(293.6e9 * 8 / 7));
  CHECK(c.time_s == test::rel(23.3e-6 + kGiB / (293.6e9 * 8 / 7)));
  // the same library on an A100-named device: 2.7.5's ll128MaxBwPerCh[ReduceScatter] x 8 channels,
  // under the A100's 235 GB/s bus cap x 0.92 = 216.2 GB/s: 121.6 GB/s
  const NcclCommunicator a100 = comm_of(ideal(1, kA100), {0, 1, 2, 3, 4, 5, 6, 7});
  CHECK_FALSE(a100.compute_capability_90);
  CHECK(nccl_bus_Bps(t, rs, NcclTuning::ring, NcclTuning::ll128, a100) == test::rel(121.6e9));
}

TEST_CASE("nccl hopper ll128: 4 H100 nodes, one rank each, Ring and Tree LL128 caps by hand") {
  const MachineSpec m = ideal(4, kH100);
  const NcclCommunicator comm = comm_of(m, {0, 8, 16, 24});
  REQUIRE(comm.nodes == 4);
  REQUIRE(comm.channels == 1);
  const NcclTuning& t = m.gpu.nccl;
  const auto ar = CollectiveKind::all_reduce;
  CHECK(nccl_bus_Bps(t, ar, NcclTuning::ring, NcclTuning::ll128, comm) == test::rel(35e9));
  CHECK(nccl_bus_Bps(t, ar, NcclTuning::tree, NcclTuning::ll128, comm) == test::rel(29.0e9));
  const NcclCommunicator v100 = comm_of(ideal(4, "NVIDIA V100 SXM2 32 GB"), {0, 8, 16, 24});
  CHECK(nccl_bus_Bps(t, ar, NcclTuning::ring, NcclTuning::ll128, v100) == test::rel(16.7e9));
  CHECK(nccl_bus_Bps(t, ar, NcclTuning::tree, NcclTuning::ll128, v100) == test::rel(16.7e9 * 7 / 9));
}

TEST_CASE("nccl hopper ll128: an inline library's 9.0 caps without their devices are refused at the path") {
  nlohmann::json lib = nlohmann::json::parse(embedded_files().at("topologies/libraries/nccl-2.7.5-nvls.json"));
  lib.erase("compute_capability_90_devices");
  nlohmann::json m = nlohmann::json::parse(embedded_files().at("topologies/machines/dgx-h100.json"));
  m["collective_library"] = lib;
  auto refused_at = [&]() -> std::string {
    try {
      (void)parse_scenario(test::small_gpt_on(m).dump(), "n.json");
    } catch (const ScenarioError& e) {
      return e.json_path();
    }
    return "";
  };
  CHECK(refused_at() == "/machine/collective_library/compute_capability_90_devices");
  lib["compute_capability_90_devices"] = nlohmann::json::parse(R"({"value": ["x"], "source": "s"})");
  lib["compute_capability_90_ll128_max_channel_Bps"]["ring"] = -1;
  m["collective_library"] = lib;
  CHECK(refused_at() == "/machine/collective_library/compute_capability_90_ll128_max_channel_Bps/ring");
}

// In one 8-GPU H100 node with NVLS, Ring/LL128 never wins: all-reduce 10 + 14 x 1.9 = 36.6 us at 293.6
// x 8/14 = 167.8 GB/s against NVLS's 23 us at 333.3 GB/s; reduce-scatter/all-gather 23.3 us at 335.5
// GB/s against NVLS's 23 us at 333.3 GB/s (NVLS ahead below 15 MB) and Ring/Simple's 32.2 us at 514.3
// GB/s (ahead above 8.59 MB). Across nodes, at one rank per node, it does (4 nodes, all-reduce of
// 1 MiB: Ring/LL128 10 + 6 x 4.0 = 34 us + 2^20 / (35 x 4/6 = 23.3 GB/s) = 78.9 us; Ring/LL 3.6 + 6 x 2.7
// = 19.8 us + 2^20 / (50/4 x 4/6 = 8.33 GB/s) = 145.6 us; Ring/Simple (8.4 + 6 x 9.6) x 1.9 (plateau) =
// 125.4 us + 2^20 / 33.3 GB/s = 156.9 us).
TEST_CASE("nccl hopper ll128: never chosen in one NVLS node, chosen across nodes at mid sizes") {
  const MachineSpec m = ideal(1, kH100);
  MachineSpec sharp = m;
  sharp.gpu.nvlink_sharp = true;
  const NcclCommunicator comm = comm_of(sharp, {0, 1, 2, 3, 4, 5, 6, 7});
  REQUIRE(comm.nvls);
  for (auto kind : {CollectiveKind::all_reduce, CollectiveKind::reduce_scatter, CollectiveKind::all_gather})
    for (double bytes = 1024; bytes <= kGiB; bytes *= 2)
      CHECK(nccl_choose(m.gpu.nccl, kind, comm, bytes, true).protocol != NcclTuning::ll128);
  const NcclCommunicator four = comm_of(ideal(4, kH100), {0, 8, 16, 24});
  const NcclCost c = nccl_choose(m.gpu.nccl, CollectiveKind::all_reduce, four, 1048576, false);
  CHECK(c.algorithm == NcclTuning::ring);
  CHECK(c.protocol == NcclTuning::ll128);
  CHECK(c.time_s == test::rel(34e-6 + 1048576 / 23.333333e9));
  const NcclCost s = nccl_cost(m.gpu.nccl, CollectiveKind::all_reduce, NcclTuning::ring, NcclTuning::simple, four, 1048576);
  CHECK(s.time_s == test::rel(66e-6 * 1.9 + 1048576 / 33.333333e9));
}
