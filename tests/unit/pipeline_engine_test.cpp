// Multi-program replay and point-to-point transfers in the engine: one rank sending to another,
// ideal pipelines (GPipe and 1F1B, one program per stage) against their closed forms in both
// fidelities, collectives inside and across programs, and the errors of malformed workloads.
// Each TEST_CASE simulates at most once (SimGrid allows one engine per process).
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sim/analysis.hpp"
#include "sim/collectives.hpp"
#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/network.hpp"
#include "sim/workload.hpp"
#include "tests/unit/approx.hpp"
#include "tests/unit/ideal_machine.hpp"

using namespace exasim;

namespace {

constexpr double kRate_flops_per_s = 1e12;  // every kernel (1e12 flops take one second)
constexpr double kBandwidth_Bps = 10e9;
constexpr double kLatency_s = 2e-6;  // per link; a flow crosses two

Op compute_op(const std::string& name, Phase phase, double seconds) {
  return Op{name, phase == Phase::forward ? "fwd" : "bwd", phase,
            ComputeWork{Kernel::gemm, Precision::fp32, seconds * kRate_flops_per_s, 0, {}}};
}

Op transfer_op(const std::string& name, Phase phase, TransferWork::Direction d, const std::string& role, int offset,
               double bytes, long tag) {
  TransferWork t;
  t.direction = d;
  t.group_role = role;
  t.offset = offset;
  t.bytes = bytes;
  t.tag = tag;
  return Op{name, d == TransferWork::Direction::send ? "send" : "recv", phase, t};
}

// Rank r on node r. `groups` of the role, ranks in member order.
GroupTable group_table(const std::vector<std::vector<int>>& groups, int rank_count, int block_size = 1) {
  GroupTable t;
  t.members = groups;
  t.block_size = block_size;
  t.index(rank_count);
  return t;
}

// ---------------------------------------------------------------------------------------------
// Two ranks: rank 0 computes 1 s then sends; rank 1 receives then computes 1 s.
// ---------------------------------------------------------------------------------------------

constexpr double kSendBytes = 1e9;

Workload send_then_compute() {
  Workload w;
  w.rank_count = 2;
  w.node_of_rank = {0, 1};
  w.class_of_rank = {0, 1};
  w.program_of_rank = {0, 1};
  w.programs.resize(2);
  w.groups["pipe"] = group_table({{0, 1}}, 2);
  using D = TransferWork::Direction;
  const OpId c0 = add_op(w.programs[0], compute_op("compute0", Phase::forward, 1.0), {});
  add_op(w.programs[0], transfer_op("send", Phase::forward, D::send, "pipe", 1, kSendBytes, 7), {c0});
  const OpId r1 = add_op(w.programs[1], transfer_op("recv", Phase::forward, D::recv, "pipe", 1, kSendBytes, 7), {});
  add_op(w.programs[1], compute_op("compute1", Phase::forward, 1.0), {r1});
  return w;
}

void check_send_then_compute(Fidelity fid) {
  const Workload w = send_then_compute();
  const test::StarNetwork net(2, kBandwidth_Bps, kLatency_s);
  const test::FixedRateCostModel cost(kRate_flops_per_s);
  const SimResult res = simulate(w, net, cost, EngineOptions{fid});
  const double flow_s = 2 * kLatency_s + kSendBytes / kBandwidth_Bps;
  CHECK(res.step_time_s == test::rel(2.0 + flow_s, 1e-9));
  CHECK(res.fidelity == fid);
  CHECK(res.stats.flows == 1);
  REQUIRE(res.ranks.size() == 2);
  for (int i = 0; i < 2; ++i) {
    const SimulatedRank& r = res.ranks[i];
    CHECK(r.rank == i);
    CHECK(r.program == i);
    CHECK(r.multiplicity == 1);
    REQUIRE(r.ops.size() == 2);
  }
  // rank 0: compute [0, 1], send [1, 1 + flow]; rank 1: recv [0, 1 + flow], compute after it.
  const auto& s0 = res.ranks[0].ops;
  const auto& s1 = res.ranks[1].ops;
  CHECK(s0[0].end_s == test::rel(1.0, 1e-9));
  CHECK(s0[1].ready_s == test::rel(1.0, 1e-9));
  CHECK(s0[1].end_s == test::rel(1.0 + flow_s, 1e-9));
  CHECK(s1[0].ready_s == 0);
  CHECK(s1[0].end_s == test::rel(1.0 + flow_s, 1e-9));
  CHECK(s1[1].end_s == test::rel(2.0 + flow_s, 1e-9));
  // Transfers are communication in the breakdown, each rank against its own program.
  const Breakdown b0 = breakdown_of(w.program(0), res.ranks[0]);
  CHECK(b0.forward_compute_s == test::rel(1.0, 1e-9));
  CHECK(b0.forward_communication_s == test::rel(flow_s, 1e-9));
  const Breakdown b1 = breakdown_of(w.program(1), res.ranks[1]);
  CHECK(b1.forward_communication_s == test::rel(1.0 + flow_s, 1e-9));
  CHECK(b1.forward_compute_s == test::rel(1.0, 1e-9));
  CHECK(b1.total_s() == test::rel(res.step_time_s, 1e-9));
  const auto cp = critical_path(w.program(1), res.ranks[1]);
  REQUIRE(cp.size() == 2);
  CHECK(cp[0].label == "recv");
  CHECK_FALSE(cp[0].compute);
  CHECK(cp[0].seconds == test::rel(1.0 + flow_s, 1e-9));
  CHECK(cp[1].label == "fwd");
  CHECK(cp[1].seconds == test::rel(1.0, 1e-9));
}

// ---------------------------------------------------------------------------------------------
// Pipelines: p stages (program s = stage s), m micro-batches, `dp` data-parallel ranks per stage
// (rank = stage * dp + d, on node rank; class = stage). Forward of a micro-batch costs tf,
// backward tb = 2 tf, each split into `layers` compute ops; activations go to stage s+1 and
// gradients to stage s-1 with zero-byte transfers (an ideal machine).
// ---------------------------------------------------------------------------------------------

enum class Schedule { gpipe, one_f_one_b };

// The order of (is_forward, micro-batch) that stage s runs.
std::vector<std::pair<bool, int>> stage_order(Schedule sch, int p, int m, int s) {
  std::vector<std::pair<bool, int>> order;
  if (sch == Schedule::gpipe) {
    for (int i = 0; i < m; ++i) order.push_back({true, i});
    for (int i = 0; i < m; ++i) order.push_back({false, i});
    return order;
  }
  const int warmup = std::min(p - s - 1, m);
  int f = 0, b = 0;
  for (; f < warmup; ++f) order.push_back({true, f});
  while (f < m) {
    order.push_back({true, f++});
    order.push_back({false, b++});
  }
  while (b < m) order.push_back({false, b++});
  return order;
}

struct PipelineSpec {
  int p = 4, m = 8, dp = 1, layers = 1;
  Schedule schedule = Schedule::gpipe;
  double tf_s = 1.0;
  double transfer_bytes = 0;
};

long forward_tag(int micro_batch) { return 2L * micro_batch; }
long backward_tag(int micro_batch) { return 2L * micro_batch + 1; }

// Stage s's program: a chain of compute ops in schedule order; a forward first receives its
// activations (posted after the previous compute op) and then sends its own; a backward
// likewise with gradients, in the other direction.
StepGraph stage_program(const PipelineSpec& ps, int s) {
  using D = TransferWork::Direction;
  StepGraph g;
  bool has_prev = false;
  OpId prev = 0;
  auto after_prev = [&]() { return has_prev ? std::vector<OpId>{prev} : std::vector<OpId>{}; };
  for (auto [forward, i] : stage_order(ps.schedule, ps.p, ps.m, s)) {
    const Phase phase = forward ? Phase::forward : Phase::backward;
    const std::string mb = std::to_string(i);
    const bool receives = forward ? s > 0 : s < ps.p - 1;
    const bool sends = forward ? s < ps.p - 1 : s > 0;
    const int offset = forward ? 1 : -1;
    const long tag = forward ? forward_tag(i) : backward_tag(i);
    std::vector<OpId> deps = after_prev();
    if (receives)
      deps.push_back(add_op(g, transfer_op((forward ? "recv_act" : "recv_grad") + mb, phase, D::recv, "pipe", offset,
                                           ps.transfer_bytes, tag),
                            after_prev()));
    const double seconds = (forward ? ps.tf_s : 2 * ps.tf_s) / ps.layers;
    for (int l = 0; l < ps.layers; ++l) {
      prev = add_op(g, compute_op((forward ? "F" : "B") + mb + "." + std::to_string(l), phase, seconds), deps);
      deps = {prev};
      has_prev = true;
    }
    if (sends)
      add_op(g, transfer_op((forward ? "send_act" : "send_grad") + mb, phase, D::send, "pipe", offset,
                            ps.transfer_bytes, tag),
             {prev});
  }
  return g;
}

Workload pipeline_workload(const PipelineSpec& ps) {
  Workload w;
  w.rank_count = ps.p * ps.dp;
  w.programs.clear();
  for (int s = 0; s < ps.p; ++s) w.programs.push_back(stage_program(ps, s));
  std::vector<std::vector<int>> pipes(ps.dp), data(ps.p);
  for (int s = 0; s < ps.p; ++s)
    for (int d = 0; d < ps.dp; ++d) {
      const int r = s * ps.dp + d;
      w.node_of_rank.push_back(r);
      w.class_of_rank.push_back(s);
      w.program_of_rank.push_back(s);
      pipes[d].push_back(r);
      data[s].push_back(r);
    }
  w.groups["pipe"] = group_table(pipes, w.rank_count);
  w.groups["data"] = group_table(data, w.rank_count);
  return w;
}

// The last compute op of a program (a stage's program may end with a send).
OpId last_compute(const StepGraph& g) {
  for (OpId v = boost::num_vertices(g); v-- > 0;)
    if (g[v].is_compute()) return v;
  throw std::logic_error("a program without compute");
}

// The ideal step: (m + p - 1)(tf + tb), whatever the schedule.
double ideal_step_s(const PipelineSpec& ps) { return (ps.m + ps.p - 1) * 3 * ps.tf_s; }

void check_ideal_pipeline(const PipelineSpec& ps, Fidelity fid) {
  const Workload w = pipeline_workload(ps);
  const test::StarNetwork net(w.rank_count, kBandwidth_Bps, kLatency_s);
  const test::FixedRateCostModel cost(kRate_flops_per_s);
  const SimResult res = simulate(w, net, cost, EngineOptions{fid});
  const double tb_s = 2 * ps.tf_s;
  CHECK(res.step_time_s == test::rel(ideal_step_s(ps), 1e-9));
  // Megatron's bubble: bubble time over ideal time = (p - 1) / m.
  const double ideal_s = ps.m * (ps.tf_s + tb_s);
  CHECK((res.step_time_s - ideal_s) / ideal_s == test::rel(double(ps.p - 1) / ps.m, 1e-9));
  CHECK(res.stats.flows == 0);  // zero-byte transfers order without flows
  const int expected_slots = fid == Fidelity::folded ? ps.p : ps.p * ps.dp;
  REQUIRE(static_cast<int>(res.ranks.size()) == expected_slots);
  for (const SimulatedRank& r : res.ranks) {
    const int stage = r.rank / ps.dp;
    CHECK(r.program == stage);
    CHECK(r.multiplicity == (fid == Fidelity::folded ? ps.dp : 1));
    REQUIRE(r.ops.size() == boost::num_vertices(w.program(r.rank)));
    // Every stage computes m (tf + tb); what it waits on its receives is communication.
    const Breakdown b = breakdown_of(w.program(r.rank), r);
    CHECK(b.forward_compute_s == test::rel(ps.m * ps.tf_s, 1e-9));
    CHECK(b.backward_compute_s == test::rel(ps.m * tb_s, 1e-9));
  }
  // Stage 0 ends last, with its last backward.
  const SimulatedRank& slow = slowest_rank(res);
  CHECK(slow.rank / ps.dp == 0);
  // An analysis given another rank's program is refused (stage 1's program has more ops).
  CHECK_THROWS_AS(breakdown_of(w.programs[1], res.ranks[0]), std::invalid_argument);
}

}  // namespace

TEST_CASE("pipeline engine: exhaustive send of 1e9 bytes takes latency plus bytes over bandwidth") {
  check_send_then_compute(Fidelity::exhaustive);
}

TEST_CASE("pipeline engine: folded send of 1e9 bytes takes latency plus bytes over bandwidth") {
  check_send_then_compute(Fidelity::folded);
}

TEST_CASE("pipeline engine: folded GPipe p=4 m=8 (dp 2, one class per stage) is (m+p-1)(tf+tb)") {
  check_ideal_pipeline({4, 8, 2, 1, Schedule::gpipe, 1.0, 0}, Fidelity::folded);
}

TEST_CASE("pipeline engine: folded 1F1B p=4 m=8 (dp 2, one class per stage) is (m+p-1)(tf+tb)") {
  check_ideal_pipeline({4, 8, 2, 1, Schedule::one_f_one_b, 1.0, 0}, Fidelity::folded);
}

TEST_CASE("pipeline engine: exhaustive GPipe p=4 m=8 dp=2 is (m+p-1)(tf+tb)") {
  check_ideal_pipeline({4, 8, 2, 1, Schedule::gpipe, 1.0, 0}, Fidelity::exhaustive);
}

TEST_CASE("pipeline engine: exhaustive 1F1B p=4 m=8 dp=2 is (m+p-1)(tf+tb)") {
  check_ideal_pipeline({4, 8, 2, 1, Schedule::one_f_one_b, 1.0, 0}, Fidelity::exhaustive);
}

TEST_CASE("pipeline engine: exhaustive 1F1B p=16 m=64 with 8 ops per pass is (m+p-1)(tf+tb)") {
  check_ideal_pipeline({16, 64, 1, 8, Schedule::one_f_one_b, 0.01, 0}, Fidelity::exhaustive);
}

TEST_CASE("pipeline engine: 1F1B stage orders hold every pass once, warm-up forwards first") {
  const int p = 4, m = 8;
  for (int s = 0; s < p; ++s) {
    CAPTURE(s);
    const auto order = stage_order(Schedule::one_f_one_b, p, m, s);
    REQUIRE(order.size() == static_cast<size_t>(2 * m));
    const int warmup = p - s - 1;
    for (int k = 0; k < warmup; ++k) CHECK(order[k] == std::make_pair(true, k));
    // then one forward, one backward, ...; each micro-batch's forward before its backward
    CHECK(order[warmup] == std::make_pair(true, warmup));
    CHECK(order[warmup + 1] == std::make_pair(false, 0));
    std::vector<int> fwd_at(m, -1), bwd_at(m, -1);
    for (size_t k = 0; k < order.size(); ++k) (order[k].first ? fwd_at : bwd_at)[order[k].second] = static_cast<int>(k);
    for (int i = 0; i < m; ++i) {
      CHECK(fwd_at[i] >= 0);
      CHECK(bwd_at[i] > fwd_at[i]);
    }
  }
}

// Transfers with bytes on the pipeline: the folded representative's flows follow the real
// stage-to-stage paths, so both fidelities agree on a star (private links only).
void check_pipeline_with_transfers(Fidelity fid) {
  PipelineSpec ps{4, 4, 2, 1, Schedule::gpipe, 0.1, 1e8};
  const Workload w = pipeline_workload(ps);
  const test::StarNetwork net(w.rank_count, kBandwidth_Bps, kLatency_s);
  const test::FixedRateCostModel cost(kRate_flops_per_s);
  const SimResult res = simulate(w, net, cost, EngineOptions{fid});
  // Each transfer takes x = 2L + bytes/B, shorter than a pass, so a stage never waits on its own
  // sends: the forward wave crosses p-1 hops, the backward wave too.
  const double x = 2 * kLatency_s + ps.transfer_bytes / kBandwidth_Bps;
  CHECK(x < ps.tf_s);
  CHECK(res.step_time_s == test::rel(ideal_step_s(ps) + 2 * (ps.p - 1) * x, 1e-9));
  // one flow per send of each simulated rank: folded simulates one pipeline of the dp
  const long pipelines = fid == Fidelity::folded ? 1 : ps.dp;
  CHECK(res.stats.flows == 2L * (ps.p - 1) * ps.m * pipelines);
}

TEST_CASE("pipeline engine: exhaustive GPipe p=4 m=4 dp=2 with 1e8-byte transfers adds one transfer per hop") {
  check_pipeline_with_transfers(Fidelity::exhaustive);
}

TEST_CASE("pipeline engine: folded GPipe p=4 m=4 dp=2 with 1e8-byte transfers adds one transfer per hop") {
  check_pipeline_with_transfers(Fidelity::folded);
}

// Per-stage data-parallel all-reduce after the pipeline: each stage's collective is matched
// inside its program; stage 0 finishes the pipeline last, and its all-reduce follows.
TEST_CASE("pipeline engine: exhaustive GPipe p=4 m=8 dp=2 then a data-parallel ring all_reduce per stage") {
  PipelineSpec ps{4, 8, 2, 1, Schedule::gpipe, 1.0, 0};
  Workload w = pipeline_workload(ps);
  const double bytes = 4e8;
  for (auto& g : w.programs) {
    const OpId last = last_compute(g);
    add_op(g, Op{"grad_all_reduce", "grad_all_reduce", Phase::optimizer,
                 CollectiveWork{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "data", bytes}},
           {last});
  }
  const test::StarNetwork net(w.rank_count, kBandwidth_Bps, kLatency_s);
  const test::FixedRateCostModel cost(kRate_flops_per_s);
  const SimResult res = simulate(w, net, cost, EngineOptions{Fidelity::exhaustive});
  const double ar_s = CollectiveSchedule(CollectiveKind::all_reduce, CollectiveAlgorithm::ring, ps.dp, bytes)
                          .alpha_beta_time_s(2 * kLatency_s, kBandwidth_Bps);
  CHECK(ar_s > 0);
  CHECK(res.step_time_s == test::rel(ideal_step_s(ps) + ar_s, 1e-9));
  CHECK(res.stats.flows == 2L * (ps.dp - 1) * ps.dp * ps.p);
}

// A collective between two programs (a tied-embedding gradient all-reduce between the first and
// the last stage) is matched by order: each side's first collective over the role.
TEST_CASE("pipeline engine: exhaustive all_reduce between the first and the last stage's programs") {
  PipelineSpec ps{4, 8, 1, 1, Schedule::one_f_one_b, 1.0, 0};
  Workload w = pipeline_workload(ps);
  const double bytes = 4e8;
  w.groups["tied"] = group_table({{0, ps.p - 1}}, w.rank_count);
  for (int s : {0, ps.p - 1}) {
    StepGraph& g = w.programs[s];
    const OpId last = last_compute(g);
    add_op(g, Op{"tied_all_reduce", "tied_all_reduce", Phase::optimizer,
                 CollectiveWork{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "tied", bytes}},
           {last});
  }
  const test::StarNetwork net(w.rank_count, kBandwidth_Bps, kLatency_s);
  const test::FixedRateCostModel cost(kRate_flops_per_s);
  const SimResult res = simulate(w, net, cost, EngineOptions{Fidelity::exhaustive});
  // The last stage enters early; each ring step then waits for stage 0's flow of the step before.
  const double ar_s = CollectiveSchedule(CollectiveKind::all_reduce, CollectiveAlgorithm::ring, 2, bytes)
                          .alpha_beta_time_s(2 * kLatency_s, kBandwidth_Bps);
  CHECK(res.step_time_s == test::rel(ideal_step_s(ps) + ar_s, 1e-9));
  const SimulatedRank& last = res.ranks.at(ps.p - 1);
  const OpId tied = boost::num_vertices(w.programs[ps.p - 1]) - 1;
  CHECK(last.ops.at(tied).ready_s < ideal_step_s(ps) - 1.0);
  CHECK(last.ops.at(tied).end_s == test::rel(ideal_step_s(ps) + ar_s, 1e-9));
}

// Compute-as-delay is decided per program: one rank's unordered compute ops must share its
// compute units even when another rank's program is a chain.
TEST_CASE("pipeline engine: unordered compute ops share the units in their program, a chain in another does not") {
  Workload w;
  w.rank_count = 2;
  w.node_of_rank = {0, 1};
  w.class_of_rank = {0, 1};
  w.program_of_rank = {0, 1};
  w.programs.resize(2);
  add_op(w.programs[0], compute_op("a", Phase::forward, 1.0), {});
  add_op(w.programs[0], compute_op("b", Phase::forward, 1.0), {});
  const OpId a = add_op(w.programs[1], compute_op("a", Phase::forward, 1.0), {});
  add_op(w.programs[1], compute_op("b", Phase::forward, 1.0), {a});
  const test::StarNetwork net(2, kBandwidth_Bps, kLatency_s);
  const test::FixedRateCostModel cost(kRate_flops_per_s);
  const SimResult res = simulate(w, net, cost, EngineOptions{Fidelity::exhaustive});
  REQUIRE(res.ranks.size() == 2);
  for (const auto& op : res.ranks[0].ops) CHECK(op.end_s == test::rel(2.0, 1e-9));
  CHECK(res.ranks[1].ops[0].end_s == test::rel(1.0, 1e-9));
  CHECK(res.ranks[1].ops[1].end_s == test::rel(2.0, 1e-9));
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

TEST_CASE("pipeline engine: a folded class whose ranks run different programs is refused") {
  Workload w = send_then_compute();
  w.class_of_rank = {0, 0};
  const test::StarNetwork net(2, kBandwidth_Bps, kLatency_s);
  const test::FixedRateCostModel cost(kRate_flops_per_s);
  CHECK_THROWS_WITH_AS(simulate(w, net, cost, EngineOptions{Fidelity::folded}),
                       doctest::Contains("ranks 0 and 1 of class 0 run different programs"), std::runtime_error);
}

TEST_CASE("pipeline engine: a receive without a matching send is refused, naming the op, rank and tag") {
  Workload w = send_then_compute();
  std::get<TransferWork>(w.programs[1][0].work).tag = 8;  // rank 0 sends tag 7
  const test::StarNetwork net(2, kBandwidth_Bps, kLatency_s);
  const test::FixedRateCostModel cost(kRate_flops_per_s);
  CHECK_THROWS_WITH_AS(simulate(w, net, cost, EngineOptions{Fidelity::exhaustive}),
                       doctest::Contains("op 'recv' (program 1) on rank 1 receives tag 8 from rank 0"),
                       std::runtime_error);
}

TEST_CASE("pipeline engine: a folded receive without a matching send is refused") {
  Workload w = send_then_compute();
  std::get<TransferWork>(w.programs[1][0].work).tag = 8;
  const test::StarNetwork net(2, kBandwidth_Bps, kLatency_s);
  const test::FixedRateCostModel cost(kRate_flops_per_s);
  CHECK_THROWS_WITH_AS(simulate(w, net, cost, EngineOptions{Fidelity::folded}),
                       doctest::Contains("has no send with that tag"), std::runtime_error);
}

TEST_CASE("pipeline engine: a receive whose tagged send goes to another rank is refused") {
  // Three ranks in a ring: rank 0 sends tag 7 to rank 2 (offset 2), rank 1 expects it (offset 1).
  Workload w;
  w.rank_count = 3;
  w.node_of_rank = {0, 1, 2};
  w.class_of_rank = {0, 1, 2};
  w.program_of_rank = {0, 1, 2};
  w.programs.resize(3);
  w.groups["pipe"] = group_table({{0, 1, 2}}, 3);
  using D = TransferWork::Direction;
  add_op(w.programs[0], transfer_op("send", Phase::forward, D::send, "pipe", 2, 1e6, 7), {});
  add_op(w.programs[1], transfer_op("recv", Phase::forward, D::recv, "pipe", 1, 1e6, 7), {});
  add_op(w.programs[2], compute_op("idle", Phase::forward, 1.0), {});
  const test::StarNetwork net(3, kBandwidth_Bps, kLatency_s);
  const test::FixedRateCostModel cost(kRate_flops_per_s);
  CHECK_THROWS_WITH_AS(simulate(w, net, cost, EngineOptions{Fidelity::exhaustive}),
                       doctest::Contains("that rank's op 'send' sends it to rank 2"), std::runtime_error);
}

TEST_CASE("pipeline engine: two sends with one tag in a program are refused") {
  Workload w = send_then_compute();
  using D = TransferWork::Direction;
  add_op(w.programs[0], transfer_op("send_again", Phase::forward, D::send, "pipe", 1, kSendBytes, 7), {});
  const test::StarNetwork net(2, kBandwidth_Bps, kLatency_s);
  const test::FixedRateCostModel cost(kRate_flops_per_s);
  CHECK_THROWS_WITH_AS(simulate(w, net, cost, EngineOptions{Fidelity::exhaustive}),
                       doctest::Contains("ops 'send' and 'send_again' both send tag 7"), std::runtime_error);
}

TEST_CASE("pipeline engine: a collective missing on one member's program is refused") {
  PipelineSpec ps{2, 2, 2, 1, Schedule::gpipe, 1.0, 0};
  Workload w = pipeline_workload(ps);
  // Only the stage-0 program has the data-parallel all-reduce... and stage 1's ranks are in
  // other groups, so add a group spanning both stages to make a member miss it.
  w.groups["cross"] = group_table({{0, 2}, {1, 3}}, w.rank_count);
  add_op(w.programs[0], Op{"grad", "grad", Phase::optimizer,
                           CollectiveWork{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "cross", 1e6}},
         {});
  const test::StarNetwork net(w.rank_count, kBandwidth_Bps, kLatency_s);
  const test::FixedRateCostModel cost(kRate_flops_per_s);
  CHECK_THROWS_WITH_AS(simulate(w, net, cost, EngineOptions{Fidelity::exhaustive}),
                       doctest::Contains("has no matching collective on rank(s) 2"), std::runtime_error);
}

TEST_CASE("pipeline engine: matched collectives that disagree on their bytes are refused") {
  PipelineSpec ps{2, 2, 1, 1, Schedule::gpipe, 1.0, 0};
  Workload w = pipeline_workload(ps);
  w.groups["cross"] = group_table({{0, 1}}, w.rank_count);
  for (int s = 0; s < 2; ++s)
    add_op(w.programs[s], Op{"grad", "grad", Phase::optimizer,
                             CollectiveWork{CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "cross", 1e6 * (s + 1)}},
           {});
  const test::StarNetwork net(w.rank_count, kBandwidth_Bps, kLatency_s);
  const test::FixedRateCostModel cost(kRate_flops_per_s);
  CHECK_THROWS_WITH_AS(simulate(w, net, cost, EngineOptions{Fidelity::exhaustive}),
                       doctest::Contains("as the same collective over role 'cross': they must agree"),
                       std::runtime_error);
}
