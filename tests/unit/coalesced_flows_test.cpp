// Coalescing independent flows (sim/live_collective.cpp, EngineOptions::coalesce_independent_flows):
// on the star of ideal_machine.hpp (every node a private up and down link to a non-blocking
// switch) each hop of a ring uses links no other route uses, so each ring step's n flows, started
// at one instant with the same bytes, ride one SimGrid comm: 2(n-1) comms for the 2(n-1)n flows of
// an all_reduce, with the step time 2(n-1)(2L + bytes/n/B) either way. Each TEST_CASE simulates
// once (one SimGrid engine per process); tests/engine_coalesce_exact.sh compares the two settings'
// step times to the last bit.
#include <doctest/doctest.h>

#include <cmath>

#include "sim/engine.hpp"
#include "tests/unit/ideal_machine.hpp"

using namespace exasim;

namespace {

constexpr double kB = 10e9;  // bytes/s per link
constexpr double kL = 1e-6;  // s per up or down link
constexpr int kN = 8;
constexpr double kBytes = 8.0 * 1024 * 1024;

// 2(n-1)(2L + bytes/n/B) = 14 x (2 us + 104.8576 us) = 1496.0064 us.
double expected_s() { return 2 * (kN - 1) * (2 * kL + kBytes / kN / kB); }

SimResult simulated(bool coalesce, CollectiveKind kind = CollectiveKind::all_reduce,
                    CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring) {
  const test::StarNetwork net(kN, kB, kL);
  const test::FixedRateCostModel cost(1e12);
  EngineOptions opt;
  opt.fidelity = Fidelity::exhaustive;
  opt.coalesce_independent_flows = coalesce;
  const Workload w =
      test::one_collective_workload(kN, CollectiveWork{kind, algorithm, "all", kBytes});
  return simulate(w, net, cost, opt);
}

}  // namespace

TEST_CASE("coalesced flows: a ring all_reduce of 8 on a star is one comm per step, at the hand-derived time") {
  const SimResult r = simulated(true);
  CHECK(r.stats.flows == 2 * (kN - 1) * kN);
  CHECK(r.stats.coalesced_flows == 2 * (kN - 1) * (kN - 1));  // all but one flow of each step
  CHECK(std::fabs(r.step_time_s - expected_s()) <= 1e-12 * expected_s());
}

TEST_CASE("coalesced flows: off, every flow is its own comm, at the same time") {
  const SimResult r = simulated(false);
  CHECK(r.stats.flows == 2 * (kN - 1) * kN);
  CHECK(r.stats.coalesced_flows == 0);
  CHECK(std::fabs(r.step_time_s - expected_s()) <= 1e-12 * expected_s());
}

TEST_CASE("coalesced flows: a direct all_to_all's flows share links, so none is coalesced") {
  // every member sends to every other at once: n-1 routes, so n-1 flows, on each up link
  const SimResult r = simulated(true, CollectiveKind::all_to_all, CollectiveAlgorithm::direct);
  CHECK(r.stats.flows > 0);
  CHECK(r.stats.coalesced_flows == 0);
}
