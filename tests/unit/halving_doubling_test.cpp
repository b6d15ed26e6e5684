// MPICH's recursive halving and doubling collectives (sim/collectives.hpp: rabenseifner,
// recursive_doubling) and the pairwise reduce-scatter: schedules by hand, the closed form by hand
// (8 members: 2 log2(p) alpha + 2 (p-1)/p n beta for the all-reduce), the exhaustive and folded
// simulations and the analytic estimate against it on the ideal star network.
// Each TEST_CASE that simulates does so exactly once (SimGrid allows one engine per process).
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <variant>
#include <vector>

#include "sim/analytic.hpp"
#include "sim/collectives.hpp"
#include "sim/engine.hpp"
#include "tests/unit/approx.hpp"
#include "tests/unit/ideal_machine.hpp"
#include "topologies/mpich_tuning.hpp"

using namespace exasim;

namespace {

constexpr double kB = 10e9;  // bytes/s per link
constexpr double kL = 2e-6;  // s per link: a path (up, down) has alpha = 4 us
using A = CollectiveAlgorithm;
using K = CollectiveKind;

struct Sent {
  int peer;
  double bytes;
};

// Member m's sends, step by step (one per step; -1 / 0 where it sends nothing).
std::vector<Sent> sends_of(const CollectiveSchedule& s, int m, bool critical = false) {
  std::vector<Sent> out;
  CollectiveStep st;
  for (int k = 0; k < s.step_count(); ++k) {
    critical ? s.critical_step(m, k, st) : s.step(m, k, st);
    REQUIRE(st.sends.size() <= 1);
    out.push_back(st.sends.empty() ? Sent{-1, 0} : Sent{st.sends[0].peer, st.sends[0].bytes});
  }
  return out;
}

void check_sends(const std::vector<Sent>& got, const std::vector<Sent>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    INFO("step ", k);
    CHECK(got[k].peer == want[k].peer);
    CHECK(got[k].bytes == test::rel(want[k].bytes));
  }
}

// One collective of `bytes` among n ranks on the star: exhaustive, folded and analytic times.
struct Times {
  double exhaustive_s, folded_s, analytic_s;
};

Times simulate_one(int n, K kind, A algo, double bytes, Fidelity fid) {
  const Workload w = test::one_collective_workload(n, CollectiveWork{kind, algo, "all", bytes}, Phase::forward, "coll");
  const test::StarNetwork net(n, kB, kL);
  const test::FixedRateCostModel cost(1e12);
  EngineOptions opt;
  opt.fidelity = fid;
  const double sim = simulate(w, net, cost, opt).step_time_s;
  const double est = estimate_step(w, net, cost).step_time_s;
  return fid == Fidelity::exhaustive ? Times{sim, -1, est} : Times{-1, sim, est};
}

}  // namespace

TEST_CASE("halving/doubling: Rabenseifner all_reduce of 8 by hand") {
  const double n = 8e6;
  const CollectiveSchedule s(K::all_reduce, A::rabenseifner, 8, n);
  CHECK(s.step_count() == 6);  // 2 log2 8
  // member 0: recursive halving with 1, 2, 4 (n/2, n/4, n/8), recursive doubling with 4, 2, 1
  check_sends(sends_of(s, 0), {{1, n / 2}, {2, n / 4}, {4, n / 8}, {4, n / 8}, {2, n / 4}, {1, n / 2}});
  check_sends(sends_of(s, 5), {{4, n / 2}, {7, n / 4}, {1, n / 8}, {1, n / 8}, {7, n / 4}, {4, n / 2}});
  // 2 log2(p) alpha + 2 (p-1)/p n beta = 6 x 4 us + 1.75 x 8e6 / 1e10 = 24 us + 1400 us
  CHECK(s.alpha_beta_time_s(4e-6, 1e10) == test::rel(6 * 4e-6 + 2.0 * 7 / 8 * n / 1e10));
  CHECK(s.alpha_beta_time_s(4e-6, 1e10) == test::rel(1424e-6));
  CHECK(s.messages_per_member() == 6);
}

TEST_CASE("halving/doubling: recursive-halving reduce_scatter and recursive-doubling all_gather of 8 by hand") {
  const double n = 8e6;
  const CollectiveSchedule rs(K::reduce_scatter, A::rabenseifner, 8, n);
  CHECK(rs.step_count() == 3);
  check_sends(sends_of(rs, 0), {{4, n / 2}, {2, n / 4}, {1, n / 8}});  // MPICH: the far half first
  CHECK(rs.alpha_beta_time_s(4e-6, 1e10) == test::rel(3 * 4e-6 + 7.0 / 8 * n / 1e10));
  const CollectiveSchedule ag(K::all_gather, A::recursive_doubling, 8, n);
  check_sends(sends_of(ag, 3), {{2, n / 8}, {1, n / 4}, {7, n / 2}});
  CHECK(ag.alpha_beta_time_s(4e-6, 1e10) == test::rel(3 * 4e-6 + 7.0 / 8 * n / 1e10));
  const CollectiveSchedule ar(K::all_reduce, A::recursive_doubling, 8, n);  // the whole buffer each step
  check_sends(sends_of(ar, 6), {{7, n}, {4, n}, {2, n}});
  CHECK(ar.alpha_beta_time_s(4e-6, 1e10) == test::rel(3 * (4e-6 + n / 1e10)));
  const CollectiveSchedule pw(K::reduce_scatter, A::pairwise, 4, n);  // MPICH's long reduce-scatter
  check_sends(sends_of(pw, 1), {{2, n / 4}, {3, n / 4}, {0, n / 4}});
  CHECK(pw.alpha_beta_time_s(4e-6, 1e10) == test::rel(3 * (4e-6 + n / 4 / 1e10)));
}

// 6 members: p' = 4, r = 2. Members 0 and 2 send their buffer to 1 and 3 and sit out; new ranks
// 1 -> 0, 3 -> 1, 4 -> 2, 5 -> 3; new rank q's real member: q < 2 ? 2q + 1 : q + 2.
TEST_CASE("halving/doubling: Rabenseifner all_reduce of 6 takes MPICH's pre- and post-step") {
  const double n = 6e6;
  const CollectiveSchedule s(K::all_reduce, A::rabenseifner, 6, n);
  CHECK(s.step_count() == 6);  // pre, 2 x 2, post
  check_sends(sends_of(s, 0), {{1, n}, {-1, 0}, {-1, 0}, {-1, 0}, {-1, 0}, {-1, 0}});
  check_sends(sends_of(s, 1), {{-1, 0}, {3, n / 2}, {4, n / 4}, {4, n / 4}, {3, n / 2}, {0, n}});
  check_sends(sends_of(s, 4), {{-1, 0}, {5, n / 2}, {1, n / 4}, {1, n / 4}, {5, n / 2}, {-1, 0}});
  CollectiveStep st;
  s.step(0, 5, st);  // member 0 receives the result in the post-step
  CHECK(st.recv_from == std::vector<int>{1});
  s.step(1, 0, st);
  CHECK(st.recv_from == std::vector<int>{0});
  // the critical path seen from a sitting member: the pair's transfers and its partner's steps
  check_sends(sends_of(s, 0, true), {{1, n}, {3, n / 2}, {4, n / 4}, {4, n / 4}, {3, n / 2}, {1, n}});
  check_sends(sends_of(s, 5, true), {{4, n}, {4, n / 2}, {3, n / 4}, {3, n / 4}, {4, n / 2}, {4, n}});
  // 2 (alpha + n beta) + 2 log2(4) alpha + 2 (3/4) n beta
  CHECK(s.alpha_beta_time_s(4e-6, 1e10) == test::rel(2 * (4e-6 + n / 1e10) + 4 * 4e-6 + 1.5 * n / 1e10));
  const CollectiveSchedule rs(K::reduce_scatter, A::rabenseifner, 6, n);  // post-step: the sitter's chunk
  check_sends(sends_of(rs, 3), {{-1, 0}, {5, n / 2}, {1, n / 4}, {2, n / 6}});
}

TEST_CASE("halving/doubling: pairs that do not exist throw") {
  CHECK_THROWS_AS(CollectiveSchedule(K::all_gather, A::recursive_doubling, 6, 100), std::invalid_argument);
  CHECK_THROWS_AS(CollectiveSchedule(K::all_gather, A::rabenseifner, 8, 100), std::invalid_argument);
  CHECK_THROWS_AS(CollectiveSchedule(K::reduce_scatter, A::recursive_doubling, 8, 100), std::invalid_argument);
  CHECK_THROWS_AS(CollectiveSchedule(K::all_to_all, A::rabenseifner, 8, 100), std::invalid_argument);
  CHECK_THROWS_AS(CollectiveSchedule(K::all_reduce, A::pairwise, 8, 100), std::invalid_argument);
  CHECK(CollectiveSchedule(K::all_reduce, A::rabenseifner, 1, 100).step_count() == 0);
}

// On the star every path is one up and one down link: alpha = 2 kL, beta = 1 / kB.
TEST_CASE("halving/doubling sim: exhaustive Rabenseifner all_reduce of 8 is the closed form, as is the analytic") {
  const double n = 8.0 * 1024 * 1024;
  const Times t = simulate_one(8, K::all_reduce, A::rabenseifner, n, Fidelity::exhaustive);
  const double want = 6 * 2 * kL + 2.0 * 7 / 8 * n / kB;
  CHECK(t.exhaustive_s == test::rel(want, 1e-6));
  CHECK(t.analytic_s == test::rel(want, 1e-6));
}

TEST_CASE("halving/doubling sim: folded Rabenseifner all_reduce of 8 is the closed form") {
  const double n = 8.0 * 1024 * 1024;
  const Times t = simulate_one(8, K::all_reduce, A::rabenseifner, n, Fidelity::folded);
  CHECK(t.folded_s == test::rel(6 * 2 * kL + 2.0 * 7 / 8 * n / kB, 1e-6));
}

TEST_CASE("halving/doubling sim: exhaustive recursive-halving reduce_scatter of 8 is the closed form") {
  const double n = 8.0 * 1024 * 1024;
  const Times t = simulate_one(8, K::reduce_scatter, A::rabenseifner, n, Fidelity::exhaustive);
  CHECK(t.exhaustive_s == test::rel(3 * 2 * kL + 7.0 / 8 * n / kB, 1e-6));
}

TEST_CASE("halving/doubling sim: folded recursive-doubling all_gather of 8 is the closed form") {
  const double n = 8.0 * 1024 * 1024;
  const Times t = simulate_one(8, K::all_gather, A::recursive_doubling, n, Fidelity::folded);
  CHECK(t.folded_s == test::rel(3 * 2 * kL + 7.0 / 8 * n / kB, 1e-6));
  CHECK(t.analytic_s == test::rel(t.folded_s, 1e-6));
}

// 6 members: the closed form is the critical path (pre-step, 4 steps, post-step). Exhaustively,
// members 4 and 5 start their steps at once and member 4's second send reaches member 1 while the
// pre-step's buffer still arrives there (the simulation's flows do not wait for the receive to be
// posted): the exhaustive time is at or above the closed form, the folded one (the critical path's
// sends) and the analytic one on it.
TEST_CASE("halving/doubling sim: exhaustive Rabenseifner all_reduce of 6 against the closed form") {
  const double n = 6.0 * 1024 * 1024;
  const Times t = simulate_one(6, K::all_reduce, A::rabenseifner, n, Fidelity::exhaustive);
  const double want = 2 * (2 * kL + n / kB) + 4 * 2 * kL + 1.5 * n / kB;
  INFO("exhaustive ", t.exhaustive_s, " s, closed form ", want, " s");
  CHECK(t.exhaustive_s >= want * (1 - 1e-9));
  CHECK(t.exhaustive_s <= want * 1.10);
  CHECK(t.analytic_s == test::rel(want, 1e-6));
}

TEST_CASE("halving/doubling sim: folded Rabenseifner all_reduce of 6 is the closed form") {
  const double n = 6.0 * 1024 * 1024;
  const Times t = simulate_one(6, K::all_reduce, A::rabenseifner, n, Fidelity::folded);
  CHECK(t.folded_s == test::rel(2 * (2 * kL + n / kB) + 4 * 2 * kL + 1.5 * n / kB, 1e-6));
}

// MPICH 3's decision (topologies/libraries/mpich-3.2.json's thresholds, MPICH's defaults).
TEST_CASE("mpich tuning: the algorithm by size and group as MPICH 3 chooses it") {
  const MpichTuning t;  // 2048, 524288, 81920, 524288 bytes
  CHECK(mpich_algorithm(t, K::all_reduce, 400, 2048, A::ring) == A::recursive_doubling);
  CHECK(mpich_algorithm(t, K::all_reduce, 400, 2049, A::ring) == A::rabenseifner);
  CHECK(mpich_algorithm(t, K::all_reduce, 400, 1e9, A::ring) == A::rabenseifner);  // MPICH 3: no ring all-reduce
  CHECK(mpich_algorithm(t, K::reduce_scatter, 240, 524287, A::ring) == A::rabenseifner);
  CHECK(mpich_algorithm(t, K::reduce_scatter, 240, 524288, A::ring) == A::pairwise);
  CHECK(mpich_algorithm(t, K::all_gather, 8, 524287, A::ring) == A::recursive_doubling);
  CHECK(mpich_algorithm(t, K::all_gather, 6, 524287, A::ring) == A::ring);
  CHECK(mpich_algorithm(t, K::all_gather, 8, 524288, A::ring) == A::ring);
  CHECK(mpich_algorithm(t, K::all_to_all, 8, 100, A::direct) == A::direct);
}

TEST_CASE("mpich tuning: adopt sets the model's ring collectives, and only where a library is named") {
  Workload w = test::one_collective_workload(8, CollectiveWork{K::all_reduce, A::ring, "all", 1e6});
  MpichTuning none;
  none.name = "";
  CHECK(adopt_mpich_tuning(w, none) == 0);
  MpichTuning t;
  t.name = "mpich-3.2";
  CHECK(adopt_mpich_tuning(w, t) == 1);
  CHECK(std::get<CollectiveWork>(w.programs[0][0].work).algorithm == A::rabenseifner);
  CHECK(adopt_mpich_tuning(w, t) == 0);  // only rings are the model's default
}
