// NCCL's NVLS reduce-scatter and all-gather (NCCL >= 2.18, one node of an NVLink SHARP switch;
// collectives.hpp's nvls, the tuner in topologies/nccl_tuning.hpp) by hand: an 8-GPU H100 node
// (NVLink 450 GB/s a direction), B = 1 GiB (NCCL's nBytes: the full buffer).
//
// Tuner (nccl-2.7.5-nvls): NVLS as for the all-reduce (one graph for every collective): 23 us, bus
// bandwidth 450 x 8/9 = 400 GB/s, x 5/6 = 333.33 GB/s. 2.7.5's Ring for a gather in one node (n-1
// = 7 steps, ratio 8/7): Simple 8.4 + 7 x 3.4 = 32.2 us at 450 x 8/7 = 514.29 GB/s; LL 3.6 + 7 x
// 0.47 = 6.89 us at 450/3 x 8/7 = 171.43 GB/s (LL128 off on the H100 under 2.7.5's rules).
//   NVLS against Ring/Simple: equal at 9.2 us / (1/333.33 - 1/514.29 GB/s) = 8.716 MB;
//   NVLS against Ring/LL:     equal at 16.11 us / (1/171.43 - 1/333.33 GB/s) = 5.686 MB;
// so the tuner runs NVLS between 5.69 and 8.72 MB and the ring at 1 GiB (2.120 ms against 3.244 ms):
// in one node NVLS moves B through each GPU's busier link direction (B, against the ring's 7/8 B)
// and wins on latency only.
// Simulation: one step, every link's busier direction carries B: 23 us + 2^30 / 450 GB/s = 2.40909 ms.
// One simulation per TEST_CASE (SimGrid: one engine per process).
#include <doctest/doctest.h>

#include <boost/range/iterator_range.hpp>
#include <nlohmann/json.hpp>
#include <vector>

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
constexpr CollectiveKind kRS = CollectiveKind::reduce_scatter;
constexpr CollectiveKind kAG = CollectiveKind::all_gather;

MachineSpec h100_node() {  // one ideal node of 8 GPUs with NVLink SHARP and dgx-h100's library
  MachineSpec m = test::ideal_gpu_cluster(1, 8, 1, kLink, 50e9);
  m.gpu.nccl = test::parsed_machine("dgx-h100").gpu.nccl;
  m.gpu.nvlink_sharp = true;
  return m;
}

NcclCommunicator comm8(const MachineSpec& m) {
  const FatTreeNetwork net(m, Precision::fp32);
  return nccl_communicator(net, m, {0, 1, 2, 3, 4, 5, 6, 7});
}

// One collective of `bytes` on the 8 GPUs: tuned (`forced_nvls` false; NVLS required of the tuner),
// or run as NVLS with NVLS's latencies whatever the tuner would pick; simulated or estimated.
double simulated(CollectiveKind kind, double bytes, bool forced_nvls, Fidelity fid, bool analytic = false) {
  const MachineSpec m = h100_node();
  const FatTreeNetwork net(m, Precision::fp32);
  const auto algorithm = forced_nvls ? CollectiveAlgorithm::nvls : CollectiveAlgorithm::ring;
  Workload w = test::one_collective_workload(8, CollectiveWork{kind, algorithm, "all", bytes}, Phase::forward, "c");
  split_classes_at_inner_level(w, m.devices_per_inner_level());
  if (!forced_nvls) REQUIRE(adopt_nccl_tuning(w, net, m) == 1);
  const NcclCost nvls = nccl_cost(m.gpu.nccl, kind, NcclTuning::nvls, NcclTuning::simple, comm8(m), bytes);
  for (StepGraph& g : w.programs)
    for (auto v : boost::make_iterator_range(boost::vertices(g)))
      if (auto* c = std::get_if<CollectiveWork>(&g[v].work)) {
        if (forced_nvls) apply_nccl_choice(m.gpu.nccl, nvls, kind, comm8(m), *c);
        REQUIRE(c->algorithm == CollectiveAlgorithm::nvls);
      }
  const RooflineCostModel cost(device_profile_of(m));
  if (analytic) return estimate_step(w, net, cost).step_time_s;
  return simulate(w, net, cost, EngineOptions{fid}).step_time_s;
}

constexpr double kSimulated1GiB = 23e-6 + kGiB / kLink;  // 2.40909 ms
constexpr double k7MB = 7e6;
constexpr double kSimulated7MB = 23e-6 + k7MB / kLink;  // 38.556 us

}  // namespace

TEST_CASE("nvls gather schedule: one step, each member sends B / (n-1) to every other, by hand") {
  for (CollectiveKind kind : {kRS, kAG}) {
    const CollectiveSchedule s(kind, CollectiveAlgorithm::nvls, 8, kGiB);
    CHECK(s.step_count() == 1);
    CollectiveStep st;
    s.step(5, 0, st);
    REQUIRE(st.sends.size() == 7);
    REQUIRE(st.recv_from.size() == 7);
    double sent = 0;
    for (const auto& snd : st.sends) {
      CHECK(snd.peer != 5);
      CHECK(snd.bytes == test::rel(kGiB / 7));
      sent += snd.bytes;
    }
    CHECK(sent == test::rel(kGiB));  // reduce-scatter's send side, all-gather's receive side: B
    CHECK(s.alpha_beta_time_s(23e-6, kLink) == test::rel(kSimulated1GiB));
  }
}

TEST_CASE("nccl nvls gather tuning: 8-GPU H100 reduce-scatter and all-gather against the closed form") {
  const MachineSpec m = h100_node();
  const NcclCommunicator comm = comm8(m);
  REQUIRE(comm.nvls);
  const NcclTuning& t = m.gpu.nccl;
  for (CollectiveKind kind : {kRS, kAG}) {
    const NcclCost nvls = nccl_cost(t, kind, NcclTuning::nvls, NcclTuning::simple, comm, kGiB);
    CHECK(nvls.latency_s == test::rel(23e-6));
    CHECK(nvls.bandwidth_Bps == test::rel(333.333333e9));
    CHECK(nvls.time_s == test::rel(23e-6 + kGiB / 333.333333e9));  // 3.2442 ms
    CHECK(nccl_cost(t, kind, NcclTuning::nvls, NcclTuning::ll, comm, kGiB).time_s < 0);  // Simple only
    const NcclCost ring = nccl_cost(t, kind, NcclTuning::ring, NcclTuning::simple, comm, kGiB);
    CHECK(ring.time_s == test::rel(32.2e-6 + kGiB / (kLink * 8 / 7)));  // 2.1200 ms
    CHECK(nccl_choose(t, kind, comm, kGiB, false).algorithm == NcclTuning::ring);
    CHECK(nccl_choose(t, kind, comm, 5.5e6, false).protocol == NcclTuning::ll);  // below 5.686 MB
    CHECK(nccl_choose(t, kind, comm, 5.5e6, false).algorithm == NcclTuning::ring);
    CHECK(nccl_choose(t, kind, comm, 5.9e6, false).algorithm == NcclTuning::nvls);
    CHECK(nccl_choose(t, kind, comm, 8.5e6, false).algorithm == NcclTuning::nvls);  // below 8.716 MB
    CHECK(nccl_choose(t, kind, comm, 8.9e6, false).algorithm == NcclTuning::ring);
    CHECK(nccl_choose(t, kind, comm, 8.9e6, false).protocol == NcclTuning::simple);
  }
  // without NVLink SHARP: the ring at every size
  MachineSpec plain = m;
  plain.gpu.nvlink_sharp = false;
  CHECK(nccl_choose(t, kRS, comm8(plain), 7e6, false).algorithm == NcclTuning::ring);
}

TEST_CASE("nccl nvls gather sim: 1 GiB reduce-scatter as NVLS, exhaustive") {
  CHECK(simulated(kRS, kGiB, true, Fidelity::exhaustive) == test::rel(kSimulated1GiB, 1e-9));
}

TEST_CASE("nccl nvls gather sim: 1 GiB reduce-scatter as NVLS, folded the same") {
  CHECK(simulated(kRS, kGiB, true, Fidelity::folded) == test::rel(kSimulated1GiB, 1e-9));
}

TEST_CASE("nccl nvls gather sim: 1 GiB reduce-scatter as NVLS, analytic the same") {
  CHECK(simulated(kRS, kGiB, true, Fidelity::folded, true) == test::rel(kSimulated1GiB, 1e-9));
}

TEST_CASE("nccl nvls gather sim: 1 GiB all-gather as NVLS, exhaustive") {
  CHECK(simulated(kAG, kGiB, true, Fidelity::exhaustive) == test::rel(kSimulated1GiB, 1e-9));
}

TEST_CASE("nccl nvls gather sim: 1 GiB all-gather as NVLS, folded the same") {
  CHECK(simulated(kAG, kGiB, true, Fidelity::folded) == test::rel(kSimulated1GiB, 1e-9));
}

TEST_CASE("nccl nvls gather sim: 1 GiB all-gather as NVLS, analytic the same") {
  CHECK(simulated(kAG, kGiB, true, Fidelity::folded, true) == test::rel(kSimulated1GiB, 1e-9));
}

TEST_CASE("nccl nvls gather sim: a tuned 7 MB all-gather runs NVLS, exhaustive") {
  CHECK(simulated(kAG, k7MB, false, Fidelity::exhaustive) == test::rel(kSimulated7MB, 1e-9));
}

TEST_CASE("nccl nvls gather sim: a tuned 7 MB reduce-scatter runs NVLS, folded") {
  CHECK(simulated(kRS, k7MB, false, Fidelity::folded) == test::rel(kSimulated7MB, 1e-9));
}
