// Replays a workload's step on SimGrid. The engine is split by job:
//  * folding.hpp: which ranks run (one representative per class, or all), and how shared
//    links fold;
//  * path_mapping.hpp: paths into the platform's links, endpoints and routes;
//  * task_graph.cpp: the step's ops into a task DAG, with send/receive matching;
//  * collective_expansion.cpp: collectives into steps of flows, in both fidelities;
//  * simgrid_driver.cpp: the platform, and the DAG replayed on SimGrid.
// replay.hpp declares the Replay that ties them.
#include "sim/engine.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "sim/replay.hpp"

namespace exasim {
namespace detail {

SimResult Replay::run() {
  build();
  prepare_sm_share();
  simulate_tasks();
  release_run_state();
  return collect_result();
}

// Frees what only the run needed before the result, which holds two times per op of every
// simulated rank, is built beside the tasks: the successor arrays, the flows' transfers and the
// exhaustive collectives' state (an exhaustive GPT-3 175B step on 128 GPUs: about 250 MB of them).
void Replay::release_run_state() {
  succ_begin_ = std::vector<int>();
  succ_.reset();
  flows_ = ChunkedVector<FlowInfo>();
  flow_comms_ = ChunkedVector<simgrid::s4u::CommPtr>();
  instance_of_.clear();
  instances_ = std::vector<CollectiveInstance>();
  participants_ = std::vector<Participant>();
  schedules_ = std::vector<CollectiveSchedule>();
  sides_ = std::vector<LiveSide>();
  live_flows_ = std::vector<LiveFlow>();
  free_flows_ = std::vector<int>();
  recvs_ = std::vector<PendingRecv>();
  syncs_ = std::vector<PendingSync>();
  kernel_marks_ = std::vector<KernelMark>();
  slot_share_ = std::vector<SlotShare>();
}

// The ops of a merged compute run (task_graph.cpp, merge_compute_runs) share their run's task:
// each one's ready and end times are rebuilt as the run's timer date was summed, op by op, or,
// beside communication kernels, as the run followed them (sm_share.cpp, replay_shared_run).
void Replay::fill_merged_times(size_t s, SimulatedRank& sr) const {
  const ProgramInfo& p = prog(static_cast<int>(s));
  const double factor = net_.compute_factor(w_.node_of_rank[fold_.slot_rank[s]]);
  for (size_t v = 0; v < sr.ops.size(); ++v) {
    if (p.merged[v] || p.merged_next[v] < 0) continue;
    if (p.kernels_hold_sms) {
      replay_shared_run(static_cast<int>(s), static_cast<int>(v), sr.ops);
      continue;
    }
    double t = sr.ops[v].ready_s;
    for (int u = static_cast<int>(v); u >= 0; u = p.merged_next[u]) {
      sr.ops[u].ready_s = t;
      const double seconds = p.op_seconds[u] * factor;
      if (seconds > 0) t = t + seconds;
      if (p.merged_next[u] >= 0) sr.ops[u].end_s = t;  // the last one's is its task's end
    }
  }
}

SimResult Replay::collect_result() {
  SimResult res;
  res.fidelity = fid_;
  long unfinished = 0;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    const Task& t = tasks_[i];
    if (t.end_s < 0) unfinished++;
    res.step_time_s = std::max(res.step_time_s, t.end_s);
  }
  res.step_time_s = std::max(res.step_time_s, last_flow_end_s_);
  if (unfinished > 0)
    throw std::runtime_error("the step graph did not complete: " + std::to_string(unfinished) +
                             " tasks never ran (a dependency cycle or a missing peer)");
  for (size_t s = 0; s < fold_.slot_rank.size(); ++s) {
    SimulatedRank sr;
    sr.rank = fold_.slot_rank[s];
    sr.multiplicity = fold_.multiplicity[s];
    sr.program = slot_prog_[s];
    const size_t base = slot_base_[s], n = slot_base_[s + 1] - base;
    sr.ops.resize(n);
    for (size_t v = 0; v < n; ++v) {
      sr.ops[v].ready_s = tasks_[op_ready_[base + v]].end_s;
      sr.ops[v].end_s = tasks_[op_done_[base + v]].end_s;
    }
    fill_merged_times(s, sr);
    res.ranks.push_back(std::move(sr));
  }
  share_changes_ = std::vector<std::vector<std::pair<double, int>>>();
  stats_.simulated_ranks = static_cast<long>(fold_.slot_rank.size());
  res.stats = stats_;
  return res;
}

}  // namespace detail

SimResult simulate(const Workload& w, const Network& net, const CostModel& cost, const EngineOptions& opt) {
  if (static_cast<int>(w.node_of_rank.size()) != w.rank_count)
    throw std::logic_error("workload: node_of_rank has the wrong size");
  if (opt.fidelity == Fidelity::folded && static_cast<int>(w.class_of_rank.size()) != w.rank_count)
    throw std::logic_error("workload: class_of_rank has the wrong size");
  if (!w.program_of_rank.empty() && static_cast<int>(w.program_of_rank.size()) != w.rank_count)
    throw std::logic_error("workload: program_of_rank has the wrong size");
  for (int p : w.program_of_rank)
    if (p < 0 || p >= static_cast<int>(w.programs.size()))
      throw std::logic_error("workload: program_of_rank names program " + std::to_string(p) + " of " +
                             std::to_string(w.programs.size()));
  detail::Replay r(w, net, cost, opt.fidelity, opt.coalesce_independent_flows);
  return r.run();
}

}  // namespace exasim
