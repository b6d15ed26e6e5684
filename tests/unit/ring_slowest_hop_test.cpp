// A ring moves at the pace of its slowest hop: a ring all-reduce of 4 ranks whose hop 1 -> 2 alone
// crosses an extra 2 us (e.g. a leaf uplink and a spine downlink) takes 2(n-1)(L_max + bytes/n/B)
// exhaustive (member 1 waits for its own previous send, over the slow hop, every step), folded
// (rank 0 represents all four, its own hop fast: each step waits the group's slowest hop) and in
// the analytic estimate (slowest_ring_pair). Each TEST_CASE simulates once (one SimGrid engine
// per process).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "sim/analytic.hpp"
#include "sim/engine.hpp"
#include "sim/network.hpp"
#include "tests/unit/ideal_machine.hpp"

using namespace exasim;

namespace {

constexpr double kB = 10e9;     // bytes/s per link
constexpr double kL = 1e-6;     // s per up or down link
constexpr double kExtra = 2e-6;  // s: the detour of hop 1 -> 2
constexpr int kN = 4;
constexpr double kBytes = 4.0 * 1024 * 1024;

// The star of ideal_machine.hpp, plus a node-private "detour" link (latency kExtra, bandwidth
// far above B) on the path from node 1 to node 2 only.
class DetourNetwork final : public Network {
 public:
  DetourNetwork() {
    kinds_ = {{"up", kB, kL, true}, {"down", kB, kL, true}, {"detour", 1e6 * kB, kExtra, true}};
  }
  int node_count() const override { return kN; }
  const std::vector<LinkKind>& link_kinds() const override { return kinds_; }
  void path(int a, int b, std::vector<LinkRef>& out) const override {
    out.push_back({0, a});
    if (a == 1 && b == 2) out.push_back({2, a});
    out.push_back({1, b});
  }
  int domain_of(int, int node) const override { return node; }
  int compute_units_per_node() const override { return 1; }
  double compute_unit_speed_flops_per_s() const override { return 1e9; }

 private:
  std::vector<LinkKind> kinds_;
};

// 2(n-1)(L_max + bytes/n/B), L_max = 2 kL + kExtra: 6 x (4 us + 104.8576 us) = 653.1456 us.
double expected_s() { return 2 * (kN - 1) * (2 * kL + kExtra + kBytes / kN / kB); }

Workload ring_all_reduce() {
  return test::one_collective_workload(kN, CollectiveWork{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "all", kBytes});
}

double simulated_s(Fidelity fid) {
  const DetourNetwork net;
  const test::FixedRateCostModel cost(1e12);
  EngineOptions opt;
  opt.fidelity = fid;
  return simulate(ring_all_reduce(), net, cost, opt).step_time_s;
}

}  // namespace

TEST_CASE("ring slowest hop: exhaustive ring all_reduce of 4 waits the slow hop every step") {
  const double t = simulated_s(Fidelity::exhaustive);
  INFO("simulated ", t, " s, by hand ", expected_s(), " s");
  CHECK(std::fabs(t - expected_s()) <= 1e-9 * expected_s());
}

TEST_CASE("ring slowest hop: folded ring all_reduce of 4 waits the group's slowest hop, not its own") {
  const double t = simulated_s(Fidelity::folded);
  INFO("simulated ", t, " s, by hand ", expected_s(), " s");
  CHECK(std::fabs(t - expected_s()) <= 1e-9 * expected_s());
}

TEST_CASE("ring slowest hop: the analytic estimate agrees") {
  const DetourNetwork net;
  const test::FixedRateCostModel cost(1e12);
  const double t = estimate_step(ring_all_reduce(), net, cost).step_time_s;
  CHECK(std::fabs(t - expected_s()) <= 1e-9 * expected_s());
}
