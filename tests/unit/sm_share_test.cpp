// Communication kernels' SMs beside compute (sim/sm_share.cpp): a GEMM of t seconds on the whole
// device, beside a collective whose kernel holds k of the device's n SMs for u seconds, runs at
// (n - k) / n while the collective runs and at the whole device after: it ends at
// t + u k / n when t (n - k) / n > u, at t n / (n - k) when it ends first. A kernel launched with its
// own SM margin m (Transformer Engine's userbuffers) runs at (n - max(m, k)) / n beside it.
// Two ranks on the star of ideal_machine.hpp (1 GB/s links, no latency): the ring all-reduce of
// 2 members sends 2 steps of bytes / 2, so u = bytes / 1e9.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "tests/unit/approx.hpp"
#include "tests/unit/fixtures.hpp"
#include "tests/unit/ideal_machine.hpp"

using namespace exasim;

namespace {

constexpr int kSms = 100;

RooflineCostModel device_of_100_sms() {
  DeviceProfile d = test::device("hundred-sm-gpu", Precision::fp16, 1e12, 1.0, 1e15);
  d.streaming_multiprocessors = kSms;
  return RooflineCostModel(d);
}

// Each rank: an all-reduce of u seconds whose kernel holds k SMs, and beside it (no dependency) a
// GEMM of t seconds launched with margin m. Returns the GEMM's end on rank 0.
double gemm_end_s(double t_s, double u_s, int k, int m = 0, Fidelity f = Fidelity::folded) {
  const test::StarNetwork net(2, 1e9, 0);
  CollectiveWork c{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "all", u_s * 1e9};
  c.kernel_sms = k;
  Workload w = test::one_collective_workload(2, c);
  ComputeWork g;
  g.kernel = Kernel::gemm;
  g.precision = Precision::fp16;
  g.flops = t_s * 1e12;
  g.shape = KernelShape{{1000, 1000, 1000}, 1};
  g.communication_sms = m;
  add_op(w.programs[0], Op{"gemm", "gemm", Phase::forward, g}, {});
  EngineOptions opt;
  opt.fidelity = f;
  const SimResult r = simulate(w, net, device_of_100_sms(), opt);
  CHECK(std::fabs(r.ranks.at(0).ops.at(0).end_s - u_s) <= 1e-9);  // the collective itself is not slowed
  return r.ranks.at(0).ops.at(1).end_s;
}

// (One simulation per TEST_CASE: SimGrid keeps global state.) Two 1 s GEMMs side by side (not a chain: SimGrid executions sharing the node's one compute unit)
// beside the same collective: each takes the share at its launch, 1 / 0.8 = 1.25 s of work, and the two
// share the unit, so both end at 2.5 s (whole: 2 s), although the collective ends at 0.5 s.
double two_gemms_end_s(int k) {
  const test::StarNetwork net(2, 1e9, 0);
  CollectiveWork c{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "all", 0.5e9};
  c.kernel_sms = k;
  Workload w = test::one_collective_workload(2, c);
  ComputeWork g;
  g.kernel = Kernel::gemm;
  g.precision = Precision::fp16;
  g.flops = 1e12;
  g.shape = KernelShape{{1000, 1000, 1000}, 1};
  add_op(w.programs[0], Op{"a", "gemm", Phase::forward, g}, {});
  add_op(w.programs[0], Op{"b", "gemm", Phase::forward, g}, {});
  const SimResult r = simulate(w, net, device_of_100_sms(), EngineOptions{});
  return std::max(r.ranks.at(0).ops.at(1).end_s, r.ranks.at(0).ops.at(2).end_s);
}

// Each rank: the same collective (u seconds, k SMs) and beside it a chain of GEMMs of t_s seconds
// each on the whole device, each after the one before: one merged run (task_graph.cpp), one timer.
SimResult gemm_chain(const std::vector<double>& t_s, double u_s, int k) {
  const test::StarNetwork net(2, 1e9, 0);
  CollectiveWork c{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "all", u_s * 1e9};
  c.kernel_sms = k;
  Workload w = test::one_collective_workload(2, c);
  for (size_t i = 0; i < t_s.size(); ++i) {
    ComputeWork g;
    g.kernel = Kernel::gemm;
    g.precision = Precision::fp16;
    g.flops = t_s[i] * 1e12;
    g.shape = KernelShape{{1000, 1000, 1000}, 1};
    std::vector<OpId> after;
    if (i > 0) after.push_back(static_cast<OpId>(i));  // op 0 is the collective
    add_op(w.programs[0], Op{"gemm" + std::to_string(i), "gemm", Phase::forward, g}, after);
  }
  return simulate(w, net, device_of_100_sms(), EngineOptions{});
}

}  // namespace

TEST_CASE("SM share: a chain of GEMMs (0.2, 0.3, 0.4 s) beside a 0.5 s collective holding 20 SMs, one timer") {
  // the first at 0.8 ends at 0.25 s; the second starts there at 0.8, has done 0.2 of its 0.3 s at
  // 0.5 s and the rest at the whole device by 0.6 s; the third 0.6 -> 1.0 s
  const SimResult r = gemm_chain({0.2, 0.3, 0.4}, 0.5, 20);
  const auto& ops = r.ranks.at(0).ops;
  CHECK(ops.at(1).end_s == test::rel(0.25, 1e-12));
  CHECK(ops.at(2).ready_s == test::rel(0.25, 1e-12));
  CHECK(ops.at(2).end_s == test::rel(0.6, 1e-12));
  CHECK(ops.at(3).ready_s == test::rel(0.6, 1e-12));
  CHECK(ops.at(3).end_s == test::rel(1.0, 1e-12));
  CHECK(r.stats.compute_activities == 1);  // one folded rank, one run: one timer, set again at 0.5 s
}

TEST_CASE("SM share: a chain whose first GEMM ends as the collective does starts the next at the whole device") {
  // 0.4 s at 0.8 ends at 0.5 s; the 0.3 s one then runs 0.5 -> 0.8 s
  const SimResult r = gemm_chain({0.4, 0.3}, 0.5, 20);
  const auto& ops = r.ranks.at(0).ops;
  CHECK(ops.at(1).end_s == test::rel(0.5, 1e-12));
  CHECK(ops.at(2).end_s == test::rel(0.8, 1e-12));
}

TEST_CASE("SM share: GEMMs that are not a chain take the share at their launch: 2 x 1.25 s on one unit = 2.5 s") {
  CHECK(two_gemms_end_s(20) == test::rel(2.5, 1e-12));
}

TEST_CASE("SM share: the same two GEMMs beside a kernel that holds no SMs: 2 s") {
  CHECK(two_gemms_end_s(0) == test::rel(2.0, 1e-12));
}

TEST_CASE("SM share: a 1 s GEMM beside a 0.5 s collective holding 20 of 100 SMs ends at 1 + 0.5 x 0.2 = 1.1 s") {
  CHECK(gemm_end_s(1.0, 0.5, 20) == test::rel(1.1, 1e-12));
}

TEST_CASE("SM share: the same in exhaustive fidelity") {
  CHECK(gemm_end_s(1.0, 0.5, 20, 0, Fidelity::exhaustive) == test::rel(1.1, 1e-12));
}

TEST_CASE("SM share: a 0.2 s GEMM wholly beside it takes 0.2 x 100 / 80 = 0.25 s") {
  CHECK(gemm_end_s(0.2, 0.5, 20) == test::rel(0.25, 1e-12));
}

TEST_CASE("SM share: a collective whose kernel holds no SMs leaves the GEMM at 1 s") {
  CHECK(gemm_end_s(1.0, 0.5, 0) == test::rel(1.0, 1e-12));
}

TEST_CASE("SM share: a GEMM launched with a 20-SM margin is not charged twice by a 20-SM kernel: 1 / 0.8 = 1.25 s") {
  CHECK(gemm_end_s(1.0, 0.5, 20, 20) == test::rel(1.25, 1e-12));
}

TEST_CASE("SM share: a 30-SM kernel beside a 20-SM margin takes the larger: 0.5 s at 0.7, then 0.65 at 0.8: 1.3125 s") {
  CHECK(gemm_end_s(1.0, 0.5, 30, 20) == test::rel(0.5 + 0.65 / 0.8, 1e-12));
}

TEST_CASE("SM share: the cost model's time beside k SMs is the margin's factor at max(margin, k), all but one SM at most") {
  const RooflineCostModel cost = device_of_100_sms();
  ComputeWork g;
  g.kernel = Kernel::gemm;
  g.precision = Precision::fp16;
  g.flops = 1e12;
  g.shape = KernelShape{{1000, 1000, 1000}, 1};
  CHECK(cost.compute_time_beside_s(g, 0) == test::rel(1.0));
  CHECK(cost.compute_time_beside_s(g, 50) == test::rel(2.0));
  CHECK(cost.compute_time_beside_s(g, 500) == test::rel(100.0));  // 99 taken: one SM left
  g.communication_sms = 60;
  CHECK(cost.compute_time_beside_s(g, 50) == test::rel(2.5));
  // a memory-bound kernel streams at the device's bandwidth whatever SMs it has
  ComputeWork add;
  add.kernel = Kernel::residual_add;
  add.precision = Precision::fp16;
  add.bytes = 1e15;
  add.flops = 1;
  CHECK(cost.compute_time_beside_s(add, 50) == test::rel(1.0));
}
