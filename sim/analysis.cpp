#include "sim/analysis.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace exasim {

namespace {

void check_program(const char* what, const StepGraph& g, const SimulatedRank& r) {
  if (r.ops.size() != boost::num_vertices(g))
    throw std::invalid_argument(std::string(what) + ": rank " + std::to_string(r.rank) + " has " +
                                std::to_string(r.ops.size()) + " op timings but the program passed has " +
                                std::to_string(boost::num_vertices(g)) + " ops; pass the rank's own program " +
                                std::to_string(r.program) + " (Workload::program(rank))");
}

}  // namespace

const SimulatedRank& slowest_rank(const SimResult& res) {
  size_t best = 0;
  double best_end = -1;
  for (size_t i = 0; i < res.ranks.size(); ++i) {
    double end = 0;
    for (auto& o : res.ranks[i].ops) end = std::max(end, o.end_s);
    if (end > best_end + 1e-15) {
      best_end = end;
      best = i;
    }
  }
  return res.ranks.at(best);
}

namespace {
// Sweeps a rank's timeline: each instant goes to the first category of `priority` that has an
// op active then (an op's category from `category_of`, -1: not counted), else to idle (the
// last slot of the returned vector, which has `count` + 1 entries).
template <class CategoryOf>
std::vector<double> sweep_categories(const StepGraph& g, const SimulatedRank& r, int count,
                                     const std::vector<int>& priority, CategoryOf category_of,
                                     const TimeRepeat& repeat) {
  struct Ev {
    double t;
    int cat;
    int delta;
  };
  std::vector<Ev> ev;
  double end = 0;
  for (size_t v = 0; v < r.ops.size(); ++v) {
    const auto& t = r.ops[v];
    end = std::max(end, t.end_s);
    const int cat = category_of(g[v]);
    if (cat >= 0 && t.end_s > t.ready_s) {
      ev.push_back({t.ready_s, cat, +1});
      ev.push_back({t.end_s, cat, -1});
    }
  }
  std::sort(ev.begin(), ev.end(), [](const Ev& a, const Ev& b) { return a.t < b.t || (a.t == b.t && a.delta < b.delta); });
  std::vector<int> active(count, 0);
  std::vector<double> acc(count + 1, 0.0);
  double now = 0;
  for (const Ev& e : ev) {
    const double dt = e.t - now;
    if (dt > 0) {
      int cat = count;
      for (int c : priority)
        if (active[c] > 0) {
          cat = c;
          break;
        }
      acc[cat] += repeat.weighted(now, e.t);
    }
    now = e.t;
    active[e.cat] += e.delta;
  }
  if (end > now) acc[count] += repeat.weighted(now, end);
  return acc;
}
}  // namespace

Breakdown breakdown_of(const StepGraph& g, const SimulatedRank& r, const TimeRepeat& repeat) {
  check_program("breakdown_of", g, r);
  // Categories: 0 fwd compute, 1 fwd comm, 2 bwd compute, 3 bwd comm, 4 optimizer compute,
  // 5 optimizer comm. Compute before communication, so that what is left of communication is
  // the exposed part.
  enum { kFwdCompute, kFwdComm, kBwdCompute, kBwdComm, kOptCompute, kOptComm, kCount };
  const std::vector<int> priority{kFwdCompute, kBwdCompute, kOptCompute, kFwdComm, kBwdComm, kOptComm};
  const auto acc = sweep_categories(g, r, kCount, priority, [](const Op& op) {
    const int base = op.phase == Phase::forward ? kFwdCompute : op.phase == Phase::backward ? kBwdCompute : kOptCompute;
    return base + (op.is_compute() ? 0 : 1);
  }, repeat);
  return {acc[kFwdCompute], acc[kFwdComm], acc[kBwdCompute], acc[kBwdComm], acc[kOptCompute] + acc[kOptComm], acc[kCount]};
}

std::vector<KindShare> breakdown_by_kind(const StepGraph& g, const SimulatedRank& r, const TimeRepeat& repeat) {
  check_program("breakdown_by_kind", g, r);
  // compute, the four collective kinds (in CollectiveKind order), point-to-point transfers.
  const int kinds = 6, transfer = 5;
  std::vector<int> priority(kinds);
  for (int i = 0; i < kinds; ++i) priority[i] = i;
  const auto acc = sweep_categories(g, r, kinds, priority, [](const Op& op) {
    if (op.is_compute()) return 0;
    if (const auto* c = std::get_if<CollectiveWork>(&op.work)) return 1 + static_cast<int>(c->kind);
    return transfer;
  }, repeat);
  std::vector<KindShare> out{{"compute", acc[0]}};
  for (CollectiveKind k : {CollectiveKind::all_reduce, CollectiveKind::reduce_scatter, CollectiveKind::all_gather,
                           CollectiveKind::all_to_all})
    out.push_back({to_string(k), acc[1 + static_cast<int>(k)]});
  out.push_back({"point_to_point", acc[transfer]});
  out.push_back({"idle", acc[kinds]});
  return out;
}

std::vector<CriticalItem> critical_path(const StepGraph& g, const SimulatedRank& r, const TimeRepeat& repeat) {
  check_program("critical_path", g, r);
  std::vector<CriticalItem> items;
  if (r.ops.empty()) return items;
  size_t v = 0;
  for (size_t i = 0; i < r.ops.size(); ++i)
    if (r.ops[i].end_s > r.ops[v].end_s) v = i;
  std::map<std::pair<std::string, std::string>, size_t> index;
  while (true) {
    const Op& op = g[v];
    const double dt = repeat.weighted(r.ops[v].ready_s, r.ops[v].end_s);
    const auto key = std::make_pair(op.label, std::string(to_string(op.phase)));
    auto it = index.find(key);
    if (it == index.end()) {
      index[key] = items.size();
      items.push_back({op.label, to_string(op.phase), op.is_compute(), dt});
    } else {
      items[it->second].seconds += dt;
    }
    auto in = boost::in_edges(v, g);
    if (in.first == in.second) break;
    size_t best = boost::source(*in.first, g);
    for (auto e = in.first; e != in.second; ++e) {
      const size_t u = boost::source(*e, g);
      if (r.ops[u].end_s > r.ops[best].end_s) best = u;
    }
    v = best;
  }
  std::stable_sort(items.begin(), items.end(), [](const CriticalItem& a, const CriticalItem& b) { return a.seconds > b.seconds; });
  return items;
}

std::vector<KernelClassUse> compute_by_kernel_class(const StepGraph& g, const CostModel& cost,
                                                    const DeviceProfile& device, OpId repeated_end, double repeats) {
  std::map<KernelClass, KernelClassUse> use;
  std::map<KernelClass, double> capacity;  // sum of time x class peak
  for (OpId v = 0; v < boost::num_vertices(g); ++v) {
    const auto* w = std::get_if<ComputeWork>(&g[v].work);
    if (!w) continue;
    const double n = v < repeated_end ? repeats : 1;
    const double t = cost.compute_time_s(*w) * n;
    KernelClassUse& u = use[w->kernel_class()];
    u.kernel_class = w->kernel_class();
    u.time_s += t;
    u.flops += w->flops * n;
    u.bytes += device.streamed_bytes(*w) * n;  // what it moves on this device (fused: less)
    capacity[w->kernel_class()] += t * device.class_peak(w->kernel_class(), w->precision);
  }
  std::vector<KernelClassUse> out;
  for (auto& [c, u] : use) {
    const double work = c == KernelClass::gemm || c == KernelClass::fused_attention ? u.flops : u.bytes;
    u.mean_efficiency = capacity[c] > 0 ? work / capacity[c] : 0;
    out.push_back(u);
  }
  return out;
}

}  // namespace exasim
