// A ring moves at the pace of its slowest member's step, bandwidth included: a ring all-reduce of
// 4 ranks on the star of ideal_machine.hpp whose node 1 sends at half bandwidth (its up link at
// bandwidth_factor 0.5, a straggler's NIC) takes 2(n-1)(2L + bytes/n/(B/2)) exhaustive (member 2
// waits for member 1's chunk every step, and everyone for member 2's), folded (rank 1 a class of
// its own; the other class's representative, whose own hop runs at B, waits each step for the
// group's narrowest hop: Replay::ring_bandwidth_lag_s) and in the analytic estimate
// (slowest_ring_pair, the bandwidth factor counted). Each TEST_CASE simulates once (one SimGrid
// engine per process).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "sim/analytic.hpp"
#include "sim/engine.hpp"
#include "tests/unit/ideal_machine.hpp"

using namespace exasim;

namespace {

constexpr double kB = 10e9;  // bytes/s per link
constexpr double kL = 1e-6;  // s per up or down link
constexpr int kN = 4;
constexpr double kBytes = 4.0 * 1024 * 1024;

// The star network with node 1's up link at half its bandwidth.
test::StarNetwork slow_uplink_network() {
  test::StarNetwork net(kN, kB, kL);
  net.scale_link(0, 1, 0.5);
  return net;
}

// 2(n-1)(2L + bytes/n/(B/2)) = 6 x (2 us + 209.7152 us) = 1270.2912 us.
double expected_s() { return 2 * (kN - 1) * (2 * kL + kBytes / kN / (kB / 2)); }

Workload ring_all_reduce() {
  return test::one_collective_workload(kN, CollectiveWork{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "all", kBytes});
}

SimResult simulated(Fidelity fid) {
  const test::StarNetwork net = slow_uplink_network();
  const test::FixedRateCostModel cost(1e12);
  EngineOptions opt;
  opt.fidelity = fid;
  return simulate(ring_all_reduce(), net, cost, opt);
}

}  // namespace

TEST_CASE("ring slow link: exhaustive ring all_reduce of 4 waits the half-bandwidth hop every step") {
  const double t = simulated(Fidelity::exhaustive).step_time_s;
  INFO("simulated ", t, " s, by hand ", expected_s(), " s");
  CHECK(std::fabs(t - expected_s()) <= 1e-9 * expected_s());
}

TEST_CASE("ring slow link: folded ring all_reduce of 4 waits the group's narrowest hop, not its own") {
  const double t = simulated(Fidelity::folded).step_time_s;
  INFO("simulated ", t, " s, by hand ", expected_s(), " s");
  CHECK(std::fabs(t - expected_s()) <= 1e-9 * expected_s());
}

TEST_CASE("ring slow link: the analytic estimate agrees") {
  const test::StarNetwork net = slow_uplink_network();
  const test::FixedRateCostModel cost(1e12);
  const double t = estimate_step(ring_all_reduce(), net, cost).step_time_s;
  CHECK(std::fabs(t - expected_s()) <= 1e-9 * expected_s());
}
