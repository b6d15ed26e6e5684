#include "app/chrome_trace.hpp"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

namespace exasim {

namespace {

// Lanes of one thread: an op goes to the first lane whose last op has ended by its start.
class Lanes {
 public:
  int place(double start_s, double end_s) {
    for (size_t i = 0; i < busy_until_s_.size(); ++i)
      if (busy_until_s_[i] <= start_s) {
        busy_until_s_[i] = end_s;
        return static_cast<int>(i);
      }
    busy_until_s_.push_back(end_s);
    return static_cast<int>(busy_until_s_.size() - 1);
  }
  int count() const { return static_cast<int>(busy_until_s_.size()); }

 private:
  std::vector<double> busy_until_s_;
};

struct Traced {
  const SimulatedRank* rank;
  long stands_for;
};

// The ranks to trace: every simulated rank, or one per class above the limit.
std::vector<Traced> traced_ranks(const Prediction& p, int max_ranks) {
  std::vector<Traced> out;
  const auto& ranks = p.sim.ranks;
  if (static_cast<int>(ranks.size()) <= max_ranks || p.workload.class_of_rank.empty()) {
    for (const auto& r : ranks) out.push_back({&r, r.multiplicity});
    return out;
  }
  std::map<int, long> class_size;
  for (int c : p.workload.class_of_rank) ++class_size[c];
  std::map<int, bool> seen;
  for (const auto& r : ranks) {
    const int c = p.workload.class_of_rank.at(r.rank);
    if (seen[c]) continue;
    seen[c] = true;
    out.push_back({&r, class_size[c]});
  }
  return out;
}

nlohmann::json work_args(const Op& op) {
  nlohmann::json a{{"op", op.name}, {"phase", to_string(op.phase)}};
  if (const auto* c = std::get_if<ComputeWork>(&op.work)) {
    a["kernel"] = to_string(c->kernel);
    a["precision"] = to_string(c->precision);
    a["flops"] = c->flops;
    a["bytes"] = c->bytes;
  } else if (const auto* c = std::get_if<CollectiveWork>(&op.work)) {
    a["kind"] = to_string(c->kind);
    a["algorithm"] = to_string(c->algorithm);
    a["group"] = c->group_role;
    a["bytes"] = c->bytes;
  } else if (const auto* t = std::get_if<TransferWork>(&op.work)) {
    a["direction"] = t->direction == TransferWork::Direction::send ? "send" : "recv";
    a["group"] = t->group_role;
    a["peer_offset"] = t->offset;
    a["bytes"] = t->bytes;
    a["tag"] = t->tag;
  }
  return a;
}

const char* category(const Op& op) {
  if (op.is_compute()) return "compute";
  return std::holds_alternative<CollectiveWork>(op.work) ? "collective" : "transfer";
}

}  // namespace

std::string chrome_trace_json(const Prediction& p, const TraceOptions& o) {
  if (p.sim.ranks.empty()) throw std::invalid_argument("the prediction has no simulated timings to trace");
  using nlohmann::json;
  constexpr int kCommunicationTidBase = 1000;  // compute lanes 0.., communication lanes 1000..
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const json& e) {
    if (!first) out += ",\n";
    first = false;
    out += e.dump();
  };
  for (const Traced& t : traced_ranks(p, o.max_ranks)) {
    const SimulatedRank& r = *t.rank;
    const StepGraph& g = p.workload.programs.at(r.program);
    const int pid = r.rank;
    emit({{"ph", "M"}, {"pid", pid}, {"name", "process_name"},
          {"args", {{"name", fmt::format("rank {} (stands for {}, program {})", r.rank, t.stands_for, r.program)}}}});
    emit({{"ph", "M"}, {"pid", pid}, {"name", "process_sort_index"}, {"args", {{"sort_index", pid}}}});
    // Ops in order of their start, so that lanes are filled greedily.
    std::vector<OpId> order;
    for (OpId v = 0; v < boost::num_vertices(g); ++v) order.push_back(v);
    std::stable_sort(order.begin(), order.end(), [&](OpId a, OpId b) { return r.ops[a].ready_s < r.ops[b].ready_s; });
    Lanes compute, communication;
    for (OpId v : order) {
      const Op& op = g[v];
      const OpTiming& tm = r.ops.at(v);
      const bool is_compute = op.is_compute();
      const int lane = (is_compute ? compute : communication).place(tm.ready_s, tm.end_s);
      emit({{"ph", "X"},
            {"pid", pid},
            {"tid", (is_compute ? 0 : kCommunicationTidBase) + lane},
            {"name", op.label},
            {"cat", category(op)},
            {"ts", tm.ready_s * 1e6},
            {"dur", (tm.end_s - tm.ready_s) * 1e6},
            {"args", work_args(op)}});
    }
    for (int i = 0; i < compute.count(); ++i)
      emit({{"ph", "M"}, {"pid", pid}, {"tid", i}, {"name", "thread_name"},
            {"args", {{"name", i == 0 ? std::string("compute") : fmt::format("compute (overlap {})", i)}}}});
    for (int i = 0; i < communication.count(); ++i)
      emit({{"ph", "M"}, {"pid", pid}, {"tid", kCommunicationTidBase + i}, {"name", "thread_name"},
            {"args", {{"name", i == 0 ? std::string("communication") : fmt::format("communication (overlap {})", i)}}}});
  }
  json meta{{"scenario", p.scenario.name},
            {"step_time_s", p.step_time_s},
            {"fidelity", to_string(p.sim.fidelity)},
            {"simulated_ranks", p.sim.ranks.size()},
            {"ranks", p.ranks},
            {"time_unit", "microseconds of simulated time"}};
  // Folded in time: the trace shows the simulated micro-batches' step, shorter than step_time_s.
  if (p.folded_in_time())
    meta["time_folding"] = {{"micro_batches", p.micro_batches},
                            {"simulated_micro_batches", p.window.simulated},
                            {"traced_step_time_s", p.simulated_step_time_s}};
  out += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":" + meta.dump() + "}\n";
  return out;
}

}  // namespace exasim
