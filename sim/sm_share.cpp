// Communication kernels beside compute: while a collective's kernel runs on a rank (from the
// collective's ready to its done on that rank, waiting for its peers included: an NCCL kernel
// holds its blocks until the collective is over), it holds CollectiveWork::kernel_sms of the
// device's streaming multiprocessors, and a compute kernel running then computes on the rest
// (CostModel::compute_time_beside_s). A kernel launched with an SM margin of its own
// (ComputeWork::communication_sms: Transformer Engine's userbuffers) already leaves that many: the
// share is the larger of the two, never their sum.
//
// Where a rank's compute ops form a chain (each a kernel timer, simgrid_driver.cpp), the running
// op's progress is kept as a fraction of its work: when the SMs held change, the part done at the
// old rate is counted and its timer is set again for the rest at the new rate (as SimGrid shares a
// host's speed among its executions). Where they do not (several compute ops at once, SimGrid
// executions on the node's compute units), an op takes the rate of the SMs held at its launch.
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>

#include <algorithm>

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
  for (ProgramInfo& p : programs_)
    if (p.graph && p.kernels_hold_sms) p.beside_s.assign(p.n_ops, {0, 0.0});
  std::sort(kernel_marks_.begin(), kernel_marks_.end(), [](const KernelMark& a, const KernelMark& b) {
    return a.task != b.task ? a.task < b.task : a.slot < b.slot;
  });
  for (const KernelMark& m : kernel_marks_) tasks_[m.task].marked = true;
  if (!kernel_marks_.empty()) slot_share_.assign(slots, SlotShare{});
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

// A compute task's seconds on its slot's node beside `sms` held by communication kernels.
double Replay::compute_beside_s(const Task& task, int sms) const {
  if (sms <= 0) return compute_s(task);
  const ProgramInfo& p = prog(task.ref);
  std::pair<int, double>& known = p.beside_s[task.op];
  if (known.first != sms)
    known = {sms, cost_.compute_time_beside_s(std::get<ComputeWork>((*p.graph)[task.op].work), sms)};
  return known.second * net_.compute_factor(w_.node_of_rank[fold_.slot_rank[task.ref]]);
}

// A chain's compute task t, its rate set by the SMs held on its slot now and whenever they change.
void Replay::start_shared_compute(int t, Task& task) {
  SlotShare& sh = slot_share_[task.ref];
  const double now_s = sg4::Engine::get_clock(), seconds = compute_beside_s(task, sh.held_sms);
  if (!(seconds > 0)) {
    complete(t);
    return;
  }
  task.parts = 1;
  sh.task = t;
  sh.done_fraction = 0;
  sh.since_s = now_s;
  sh.duration_s = seconds;
  sh.timer = simgrid::kernel::timer::Timer::set(now_s + seconds, [this, t]() { shared_compute_done(t); });
  stats_.compute_activities++;
  start_memory_stream(t, task);
}

void Replay::shared_compute_done(int t) {
  SlotShare& sh = slot_share_[task_ref(t).ref];
  sh.task = -1;
  sh.timer = nullptr;
  part_done(t);
}

// The SMs held on a slot become `sms`: its running chain task, if any, goes on at the new rate.
void Replay::set_held_sms(int slot, int sms) {
  SlotShare& sh = slot_share_[slot];
  sh.held_sms = sms;
  if (sh.task < 0) return;
  const double now_s = sg4::Engine::get_clock();
  sh.done_fraction = std::min(1.0, sh.done_fraction + (now_s - sh.since_s) / sh.duration_s);
  sh.since_s = now_s;
  sh.duration_s = compute_beside_s(task_ref(sh.task), sms);
  sh.timer->remove();
  const int t = sh.task;
  sh.timer = simgrid::kernel::timer::Timer::set(now_s + (1 - sh.done_fraction) * sh.duration_s,
                                                [this, t]() { shared_compute_done(t); });
}

}  // namespace exasim::detail
