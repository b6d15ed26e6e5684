// Communication kernels beside compute: while a collective's kernel runs on a rank (from the
// collective's ready to its done on that rank, waiting for its peers included: an NCCL kernel
// holds its blocks until the collective is over), it holds CollectiveWork::kernel_sms of the
// device's streaming multiprocessors, and a compute kernel running then computes on the rest
// (CostModel::compute_time_beside_s). A kernel launched with an SM margin of its own
// (ComputeWork::communication_sms: Transformer Engine's userbuffers) already leaves that many: the
// share is the larger of the two, never their sum.
//
// Where a rank's compute ops form a chain (each task a kernel timer, simgrid_driver.cpp; a task
// runs a run of ops, task_graph.cpp's merge_compute_runs), each op starts at the SMs free when it
// starts, the next where the one before ends, and the running op's progress is kept as a fraction
// of its work: when the SMs held change, the part done at the old rate is counted and the rest goes
// on at the new rate (as SimGrid shares a host's speed among its executions); the task's one timer,
// at its run's end, is set again. One timer per run rather than per op: each timer's date is one
// more SimGrid instant, at which every live comm's remaining bytes are updated. Where they do not (several compute ops at once, SimGrid
// executions on the node's compute units), an op takes the rate of the SMs held at its launch.
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

#include "sim/replay.hpp"

namespace sg4 = simgrid::s4u;

namespace exasim::detail {

// After build: each collective that holds SMs marks its ready task (+ its SMs on its slot) and its
// done task (- them).
void Replay::prepare_sm_share() {
  const size_t slots = fold_.slot_rank.size();
  for (size_t s = 0; s < slots; ++s) {
    const ProgramInfo& p = prog(static_cast<int>(s));
    for (const auto& [v, sms] : p.sm_ops) {  // (prepare_program listed them)
      kernel_marks_.push_back({op_ready_[slot_base_[s] + v], static_cast<int>(s), sms});
      kernel_marks_.push_back({op_done_[slot_base_[s] + v], static_cast<int>(s), -sms});
    }
  }
  bool merged_runs = false;
  for (const ProgramInfo& p : programs_)
    if (p.graph && p.kernels_hold_sms)
      merged_runs = merged_runs || std::find(p.merged.begin(), p.merged.end(), 1) != p.merged.end();
  std::sort(kernel_marks_.begin(), kernel_marks_.end(), [](const KernelMark& a, const KernelMark& b) {
    return a.task != b.task ? a.task < b.task : a.slot < b.slot;
  });
  for (const KernelMark& m : kernel_marks_) tasks_[m.task].marked = true;
  if (kernel_marks_.empty()) return;
  slot_share_.assign(slots, SlotShare{});
  if (merged_runs) share_changes_.assign(slots, {});
}

// Task t is done: the SMs its marks hold or free, slot by slot (a task that both starts and ends
// collectives on a slot changes it once, by the sum).
void Replay::apply_kernel_marks(int t) {
  auto i = std::lower_bound(kernel_marks_.begin(), kernel_marks_.end(), t,
                            [](const KernelMark& m, int task) { return m.task < task; });
  while (i != kernel_marks_.end() && i->task == t) {
    int delta = 0;
    const int slot = i->slot;
    for (; i != kernel_marks_.end() && i->task == t && i->slot == slot; ++i) delta += i->sms;
    if (delta != 0) set_held_sms(slot, slot_share_[slot].held_sms + delta);
  }
}

// Op `op` of a slot's program: its seconds on the slot's node beside `sms` held by communication
// kernels.
double Replay::op_beside_s(int slot, int op, int sms) const {
  const ProgramInfo& p = prog(slot);
  const double factor = net_.compute_factor(w_.node_of_rank[fold_.slot_rank[slot]]);
  if (sms <= 0) return p.op_seconds[op] * factor;
  return work_beside_s(p.work[op], sms) * factor;
}

// A distinct work's seconds beside `sms` held by communication kernels (its last few kept).
double Replay::work_beside_s(int work, int sms) const {
  DistinctWork& d = works_[work];
  for (const auto& [held, seconds] : d.beside)
    if (held == sms) return seconds;
  auto& slot = d.beside[d.next];
  d.next = (d.next + 1) % static_cast<int>(d.beside.size());
  slot = {sms, cost_.compute_time_beside_s(*d.work, sms)};
  return slot.second;
}

// A run's state sh (on `slot`) starts its op `op` at start_s, at the share sh holds.
void Replay::begin_shared_op(SlotShare& sh, int slot, int op, double start_s) const {
  sh.op = op;
  sh.done_fraction = 0;
  sh.since_s = start_s;
  const double seconds = op_beside_s(slot, op, sh.held_sms);
  sh.duration_s = seconds > 0 ? seconds : 0;  // a free op ends as it starts
}

// A run's state sh (on `slot`) goes past the ops of its run that end by until_s, each next one
// starting at the share sh holds; their times written to `ops` where given (fill_merged_times).
// False when its last op ends by then too: that one is left running, its timer due now.
bool Replay::pass_ended_ops(SlotShare& sh, int slot, double until_s, std::vector<OpTiming>* ops) const {
  const ProgramInfo& p = prog(slot);
  for (;;) {
    const double end_s = sh.op_end_s();
    if (end_s > until_s) return true;
    const int next = p.merged_next[sh.op];
    if (next < 0) return false;
    if (ops) (*ops)[sh.op].end_s = (*ops)[next].ready_s = end_s;
    begin_shared_op(sh, slot, next, end_s);
  }
}

// The SMs held become `sms` at now_s, while sh's running op ends after now_s: the part of it done at
// the old rate is counted, the rest goes on at the new one.
void Replay::change_share(SlotShare& sh, int slot, double now_s, int sms) const {
  sh.held_sms = sms;
  sh.done_fraction = std::min(1.0, sh.done_fraction + (now_s - sh.since_s) / sh.duration_s);
  sh.since_s = now_s;
  sh.duration_s = op_beside_s(slot, sh.op, sms);
}

// The times of a run's ops beside communication kernels, its first op ready at ops[head].ready_s:
// the run followed again through the slot's changes of the SMs held (share_changes_), with the
// arithmetic the run had (start_shared_compute, set_held_sms).
void Replay::replay_shared_run(int slot, int head, std::vector<OpTiming>& ops) const {
  const auto& changes = share_changes_[slot];
  const double start_s = ops[head].ready_s;
  auto c = std::upper_bound(changes.begin(), changes.end(), start_s,
                            [](double t, const std::pair<double, int>& ch) { return t < ch.first; });
  SlotShare sh;
  sh.held_sms = c == changes.begin() ? 0 : std::prev(c)->second;
  begin_shared_op(sh, slot, head, start_s);
  for (; c != changes.end(); ++c) {
    if (!pass_ended_ops(sh, slot, c->first, &ops)) return;
    change_share(sh, slot, c->first, c->second);
  }
  pass_ended_ops(sh, slot, std::numeric_limits<double>::infinity(), &ops);
}

// The slot's running task's end if the share held now holds: its running op's end, then each next
// op of its run starting at the end of the one before (as one timer per op had it).
double Replay::shared_run_end_s(int slot) const {
  const SlotShare& sh = slot_share_[slot];
  const ProgramInfo& p = prog(slot);
  double end_s = sh.op_end_s();
  for (int u = p.merged_next[sh.op]; u >= 0; u = p.merged_next[u]) {
    const double seconds = op_beside_s(slot, u, sh.held_sms);
    if (seconds > 0) end_s = end_s + seconds;
  }
  return end_s;
}

// A chain's compute task t (a run of ops), each op's rate set by the SMs held on its slot when it
// starts and whenever they change; one timer for the run, set again when they change.
void Replay::start_shared_compute(int t, Task& task) {
  SlotShare& sh = slot_share_[task.ref];
  const double now_s = sg4::Engine::get_clock();
  sh.task = t;
  begin_shared_op(sh, task.ref, task.op, now_s);
  const double end_s = shared_run_end_s(task.ref);
  if (!(end_s > now_s)) {
    sh.task = -1;
    complete(t);
    return;
  }
  task.parts = 1;
  sh.timer = simgrid::kernel::timer::Timer::set(end_s, [this, t]() { shared_compute_done(t); });
  stats_.compute_activities++;
  start_memory_stream(t, task);
}

void Replay::shared_compute_done(int t) {
  SlotShare& sh = slot_share_[task_ref(t).ref];
  sh.task = -1;
  sh.timer = nullptr;
  part_done(t);
}

// The SMs held on a slot become `sms`: its running task's op goes on at the new rate, the ops after
// it start at it. Where runs are merged, the change is kept for their ops' times (replay_shared_run).
void Replay::set_held_sms(int slot, int sms) {
  SlotShare& sh = slot_share_[slot];
  const double now_s = sg4::Engine::get_clock();
  if (!share_changes_.empty()) share_changes_[slot].emplace_back(now_s, sms);
  if (sh.task < 0 || !pass_ended_ops(sh, slot, now_s, nullptr)) {  // (the ops it passes started at the old share)
    sh.held_sms = sms;
    return;
  }
  change_share(sh, slot, now_s, sms);
  sh.timer->remove();
  const int t = sh.task;
  sh.timer = simgrid::kernel::timer::Timer::set(shared_run_end_s(slot), [this, t]() { shared_compute_done(t); });
}

}  // namespace exasim::detail
