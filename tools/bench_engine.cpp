// tools/bench --engine: the engine alone on one collective, so that its cost can be measured at
// any rank count without a model. Usage:
//   exasim_bench_engine allreduce RANKS folded|exhaustive [BYTES [uncoalesced]]
// One ring all-reduce of BYTES (default 64 MiB) over RANKS ranks, one rank per node, each
// node's NIC (25 GB/s each way, 1 us) on one non-blocking switch. Folded: every rank is of one
// class (the ring is symmetric), and the folded answer is the exact alpha-beta one.
// uncoalesced: every flow its own SimGrid comm (EngineOptions::coalesce_independent_flows off), to
// compare; the step time is printed to 17 digits so that the two can be compared exactly.
// Prints the step time, the flows (and how many rode another's comm), the wall time of the simulation and the peak RSS of the
// process as one JSON line. Not a unit test: its figures are benchmark figures.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/network.hpp"
#include "sim/workload.hpp"

using namespace exasim;

namespace {

class OneSwitch final : public Network {
 public:
  explicit OneSwitch(int nodes) : nodes_(nodes) {
    kinds_ = {{"nic_up", 25e9, 1e-6, true}, {"nic_down", 25e9, 1e-6, true}};
  }
  int node_count() const override { return nodes_; }
  const std::vector<LinkKind>& link_kinds() const override { return kinds_; }
  void path(int src, int dst, std::vector<LinkRef>& out) const override {
    out.push_back({0, src});
    out.push_back({1, dst});
  }
  int domain_of(int, int node) const override { return node; }
  int compute_units_per_node() const override { return 1; }
  double compute_unit_speed_flops_per_s() const override { return 1e12; }

 private:
  int nodes_;
  std::vector<LinkKind> kinds_;
};

class NoCompute final : public CostModel {
 public:
  double compute_time_s(const ComputeWork&) const override { return 0; }
  std::string describe() const override { return "none"; }
};

Workload ring_all_reduce(int ranks, double bytes) {
  Workload w;
  w.rank_count = ranks;
  Op op;
  op.name = "all_reduce";
  op.label = "all_reduce";
  CollectiveWork c;
  c.kind = CollectiveKind::all_reduce;
  c.algorithm = CollectiveAlgorithm::ring;
  c.group_role = "world";
  c.bytes = bytes;
  op.work = c;
  add_op(w.programs[0], op, {});
  GroupTable& gt = w.groups["world"];
  gt.members.emplace_back();
  for (int r = 0; r < ranks; ++r) {
    gt.members[0].push_back(r);
    w.node_of_rank.push_back(r);
    w.class_of_rank.push_back(0);
  }
  gt.index(ranks);
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || std::string(argv[1]) != "allreduce") {
    std::fprintf(stderr, "usage: exasim_bench_engine allreduce RANKS folded|exhaustive [BYTES [uncoalesced]]\n");
    return 2;
  }
  const int ranks = std::atoi(argv[2]);
  const std::string fid = argv[3];
  const double bytes = argc > 4 ? std::atof(argv[4]) : 64.0 * 1024 * 1024;
  if (ranks < 2 || (fid != "folded" && fid != "exhaustive") || bytes <= 0) {
    std::fprintf(stderr, "exasim_bench_engine: RANKS >= 2, folded|exhaustive, BYTES > 0\n");
    return 2;
  }
  try {
    const Workload w = ring_all_reduce(ranks, bytes);
    const OneSwitch net(ranks);
    const NoCompute cost;
    EngineOptions opt;
    opt.fidelity = fid == "folded" ? Fidelity::folded : Fidelity::exhaustive;
    opt.coalesce_independent_flows = !(argc > 5 && std::string(argv[5]) == "uncoalesced");
    const auto t0 = std::chrono::steady_clock::now();
    const SimResult res = simulate(w, net, cost, opt);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("{\"ranks\": %d, \"fidelity\": \"%s\", \"bytes\": %.0f, \"step_time_s\": %.17g, \"flows\": %ld, "
                "\"coalesced_flows\": %ld, "
                "\"simulated_ranks\": %ld, \"wall_s\": %.3f, \"peak_rss_bytes\": %ld}\n",
                ranks, fid.c_str(), bytes, res.step_time_s, res.stats.flows, res.stats.coalesced_flows, res.stats.simulated_ranks, wall,
                static_cast<long>(ru.ru_maxrss) * 1024);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exasim_bench_engine: %s\n", e.what());
    return 1;
  }
  return 0;
}
