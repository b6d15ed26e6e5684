// The SimGrid side: the platform built from the mapped paths, and the task DAG replayed on it.
// SimGrid activities are created only when a task becomes ready. Keeping dependencies out of
// SimGrid matters: with every activity started up front and chained by add_successor,
// SimGrid 3.32 spends time linear in the number of live comms at each completion.
//
// SimGrid 3.32 also keeps every activity started from maestro (all of ours) in one
// std::list, and removes each one on completion with list::remove, a walk over the whole
// list: every completion costs time linear in the number of live activities. Pure delays
// therefore do not become SimGrid activities: a flow's extra latency, and a compute task
// when a rank's compute tasks never overlap (then nothing shares its compute units and
// the task lasts exactly its cost), are kernel timers, which live in a heap. The comms
// remain: the list is maestro's activities_, which holds every comm made by sendto_init (it
// detaches them); since the engine holds each comm it starts, each one is taken out of that
// list right after its start (detached_comms.hpp), so the walk at its completion finds an
// empty list. Where that cannot be checked, the list's nodes are still kept in a compact
// arena (see node_arena.hpp) so that the walk runs from cache.
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/detached_comms.hpp"
#include "sim/node_arena.hpp"
#include "sim/replay.hpp"

namespace sg4 = simgrid::s4u;

namespace exasim::detail {

void Replay::build_platform() {
  // The root zone holds the compute hosts, which never communicate; the network zone holds
  // the flow endpoints and an explicit route for each pair that the step uses.
  auto* compute = sg4::create_empty_zone("exasim");
  auto* root = sg4::create_full_zone("network");
  root->set_parent(compute);
  unit_speed_ = net_.compute_unit_speed_flops_per_s();
  const int units = net_.compute_units_per_node();
  // A compute task counts its running activities (one per unit) in Task::parts, an int16_t.
  if (units > std::numeric_limits<int16_t>::max())
    throw std::invalid_argument("a node has " + std::to_string(units) + " compute units; the engine counts at most " +
                                std::to_string(std::numeric_limits<int16_t>::max()));
  cg_hosts_.resize(fold_.slot_rank.size());
  for (size_t s = 0; s < fold_.slot_rank.size(); ++s) {
    const std::string base = net_.node_name(w_.node_of_rank[fold_.slot_rank[s]]);
    for (int u = 0; u < units; ++u)
      cg_hosts_[s].push_back(compute->create_host(base + ".cg" + std::to_string(u), unit_speed_));
  }
  for (auto& name : paths_.endpoints()) ep_hosts_.push_back(root->create_host(name, 1.0));
  std::vector<sg4::Link*> sglinks;
  for (auto& l : paths_.links())
    sglinks.push_back(root->create_link(l.name, l.bandwidth_Bps)->set_latency(l.latency_s)->seal());
  for (auto& [pair, route] : paths_.routes()) {
    std::vector<sg4::LinkInRoute> lr;
    for (int l : route) lr.emplace_back(sglinks[l]);
    root->add_route(ep_hosts_[pair.first]->get_netpoint(), ep_hosts_[pair.second]->get_netpoint(), nullptr, nullptr,
                    lr, false);
  }
  root->seal();
  compute->seal();
  stats_.links = static_cast<long>(paths_.links().size());
  stats_.hosts = static_cast<long>(ep_hosts_.size() + fold_.slot_rank.size() * units);
  stats_.routes = static_cast<long>(paths_.routes().size());
}

// An activity's data: its task id t as 2t + 2 (the DAG's) or -2t - 1 (a live flow's); never null.
static void* tag_of(int t) { return reinterpret_cast<void*>(static_cast<intptr_t>(t >= 0 ? 2L * t + 2 : -2L * t - 1)); }
static int task_of_tag(const void* p) {
  const auto v = reinterpret_cast<intptr_t>(p);
  return static_cast<int>(v % 2 == 0 ? v / 2 - 1 : -(v + 1) / 2);
}

void Replay::launch(int t) {
  Task& task = task_ref(t);
  void* tag = tag_of(t);
  if (task.kind == Task::side) {
    start_side(task.ref);
    return;
  }
  if (task.kind == Task::compute && slot_compute_as_delay_[task.ref] && shares_sms(task)) {
    start_shared_compute(t, task);
    return;
  }
  if (task.kind == Task::compute && slot_compute_as_delay_[task.ref]) {
    const double now_s = sg4::Engine::get_clock(), end_s = compute_end_s(task, now_s);
    if (end_s == now_s) {
      complete(t);
      return;
    }
    task.parts = 1;
    simgrid::kernel::timer::Timer::set(end_s, [this, t]() { part_done(t); });
    stats_.compute_activities++;
    start_memory_stream(t, task);
    return;
  }
  const double seconds = task.kind != Task::compute ? 0
                         : shares_sms(task)         ? compute_beside_s(task, slot_share_[task.ref].held_sms)
                                                    : compute_s(task);
  FlowInfo* flow = task.kind == Task::flow ? &flow_of(t) : nullptr;
  if (task.kind == Task::join || (task.kind == Task::compute && seconds <= 0) ||
      (flow && flow->amount <= 0 && flow->delay_s <= 0)) {
    complete(t);
    return;
  }
  if (task.kind == Task::compute) {
    for (sg4::Host* h : cg_hosts_[task.ref]) {
      sg4::ExecPtr x = sg4::Exec::init();
      x->set_flops_amount(seconds * unit_speed_)->set_host(h);
      x->set_data(tag);
      x->start();
      open_head_ = open_tail_ = 0;  // nothing rides a comm started before another activity
      live_[x.get()] = x;
      task.parts++;
      stats_.compute_activities++;
    }
    start_memory_stream(t, task);
    return;
  }
  // flow: an optional delay, then the transfer
  if (flow->delay_s > 0 && task.parts == 0) {
    task.parts = -1;  // marks the delay stage
    start_delay(t, flow->delay_s);
    stats_.delay_activities++;
    return;
  }
  task.parts = 1;
  if (t < 0 && join_open_comm(t, *flow)) {
    stats_.flows++;
    stats_.coalesced_flows++;
    return;
  }
  detached_.before_create();
  sg4::CommPtr c = sg4::Comm::sendto_init(ep_hosts_[flow->src], ep_hosts_[flow->dst]);
  c->set_payload_size(static_cast<uint64_t>(std::llround(flow->amount)));
  c->set_data(tag);
  c->start();
  detached_.after_start(*c);
  open_head_ = open_tail_ = 0;
  if (t < 0) {
    live_flows_[-1 - t].comm = std::move(c);
    if (in_drain_ && live_flows_[-1 - t].signature >= 0) open_head_ = open_tail_ = t;  // later flows may ride it
  } else {  // held at its flow's index: no hash map insertion and lookup per flow
    while (flow_comms_.size() <= static_cast<size_t>(task.ref)) flow_comms_.emplace_back();
    flow_comms_[task.ref] = std::move(c);
  }
  stats_.flows++;
}

// Coalescing (live_collective.cpp): live flow t rides the open comm when its route has the open
// comm's signature and it carries the same bytes.
bool Replay::join_open_comm(int t, const FlowInfo& flow) {
  if (open_head_ == 0 || !in_drain_) return false;
  const LiveFlow& f = live_flows_[-1 - t];
  const LiveFlow& head = live_flows_[-1 - open_head_];
  if (f.signature < 0 || f.signature != head.signature || flow.amount != head.info.amount) return false;
  live_flows_[-1 - open_tail_].next_in_comm = t;
  open_tail_ = t;
  return true;
}

// A compute task of a chain started at start_s: its end, op after op of its run, each op's end
// its start plus its seconds (a timer at that date, as one task per op had), a free op's its start.
double Replay::compute_end_s(const Task& task, double start_s) const {
  const ProgramInfo& p = prog(task.ref);
  const double factor = net_.compute_factor(w_.node_of_rank[fold_.slot_rank[task.ref]]);
  for (int v = task.op; v >= 0; v = p.merged_next[v]) {
    const double seconds = p.op_seconds[v] * factor;
    if (seconds > 0) start_s = start_s + seconds;
  }
  return start_s;
}

// Compute task t's memory traffic, where its node has a memory path (Network::memory_path_kind): a
// comm of its op's bytes over the node's memory link, which the task waits for too. Alone it ends
// within the op's seconds; beside flows over the same link, both slow down by max-min sharing.
void Replay::start_memory_stream(int t, Task& task) {
  if (slot_memory_eps_.empty()) return;
  const double bytes = prog(task.ref).op_memory_bytes[task.op];
  if (!(bytes > 0)) return;
  const auto [src, dst] = slot_memory_eps_[task.ref];
  detached_.before_create();
  sg4::CommPtr c = sg4::Comm::sendto_init(ep_hosts_[src], ep_hosts_[dst]);
  c->set_payload_size(static_cast<uint64_t>(std::llround(bytes)));
  c->set_data(tag_of(t));
  c->start();
  detached_.after_start(*c);
  open_head_ = open_tail_ = 0;  // nothing rides a comm started before another activity
  live_[c.get()] = c;
  task.parts++;
  stats_.memory_streams++;
}

void Replay::start_delay(int t, double seconds) {
  simgrid::kernel::timer::Timer::set(sg4::Engine::get_clock() + seconds, [this, t]() { part_done(t); });
}

// One SimGrid activity (or delay) of task t is over.
void Replay::part_done(int t) {
  Task& task = task_ref(t);
  if (task.kind == Task::flow && task.parts == -1) {  // delay stage over: start the transfer
    flow_of(t).delay_s = 0;
    task.parts = 0;
    if (flow_of(t).amount <= 0) {  // a wait alone (a folded tree's lockstep): done
      complete(t);
      drain_soon();
      return;
    }
    launch(t);
    return;
  }
  if (--task.parts == 0) {
    complete(t);
    drain_soon();
  }
}

// Launches the ready tasks once SimGrid has handled every completion of this instant,
// from a timer at the current date (so nothing starts later than it would have). SimGrid
// walks all live comms at each completion (see the top of this file); in a ring step
// whose flows all end at once, launching the next step's flows only after the batch keeps
// them out of the list while the rest of the batch completes.
void Replay::drain_soon() {
  if (drain_pending_) return;
  drain_pending_ = true;
  simgrid::kernel::timer::Timer::set(sg4::Engine::get_clock(), [this]() {
    drain_pending_ = false;
    drain();
  });
}

void Replay::complete(int t) {
  if (t < 0) {
    live_flow_done(t);
    return;
  }
  Task& task = tasks_[t];
  if (task.marked) apply_kernel_marks(t);
  task.end_s = sg4::Engine::get_clock();
  for (int i = succ_begin_[t]; i < succ_begin_[t + 1]; ++i)
    if (--tasks_[succ_[i]].pending == 0) ready_queue_.push_back(succ_[i]);
}

void Replay::drain() {
  in_drain_ = true;
  while (!ready_queue_.empty()) {
    const int t = ready_queue_.back();
    ready_queue_.pop_back();
    launch(t);
  }
  in_drain_ = false;
  open_head_ = open_tail_ = 0;
}

// Runs the task DAG on SimGrid, from the tasks with no predecessor until nothing is left.
void Replay::simulate_tasks() {
  const NodeArenaScope arena;  // must cover every SimGrid activity's creation
  int argc = 2;
  char arg0[] = "exasim";
  char arg1[] = "--log=root.thresh:warning";
  char* argv[] = {arg0, arg1, nullptr};
  sg4::Engine e(&argc, argv);
  // CM02 with the TCP window bound and cross-traffic off: a flow's time is
  // latency + bytes / bandwidth share, the alpha-beta model the collectives assume.
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/TCP-gamma:0");
  sg4::Engine::set_config("network/crosstraffic:0");
  // Full rather than the default Lazy update: each completion already costs time linear in
  // the live comms (see the top of this file), so Full's per-step pass over them is cheap,
  // and it skips Lazy's action heap. moda-1024 exhaustive: 47 s with Lazy, 35 s with Full
  // (39.9 s with Full and selective update). Both solve the same max-min sharing.
  sg4::Engine::set_config("network/optim:Full");
  find_exclusive_routes();
  build_platform();

  sg4::Activity::on_completion_cb([this](sg4::Activity const& a) {
    if (a.get_data<void>() == nullptr) return;
    const int t = task_of_tag(a.get_data<void>());
    // SimGrid may still touch the activity after this callback: release it once time advances.
    if (t < 0) {  // a live flow's transfer: it holds its comm, which may carry later flows too
      finished_.push_back(std::move(live_flows_[-1 - t].comm));
      for (int f = t; f != 0;) {
        const int next = live_flows_[-1 - f].next_in_comm;  // f's slot is recycled by part_done
        part_done(f);
        f = next;
      }
      return;
    }
    if (task_ref(t).kind == Task::flow) {
      finished_.push_back(std::move(flow_comms_[task_ref(t).ref]));
      part_done(t);
      return;
    }
    auto it = live_.find(&a);
    if (it != live_.end()) {
      finished_.push_back(std::move(it->second));
      live_.erase(it);
    }
    part_done(t);
  });

  sg4::Engine::on_time_advance_cb([this](double) { finished_.clear(); });

  for (size_t t = 0; t < tasks_.size(); ++t)
    if (tasks_[t].pending == 0) ready_queue_.push_back(static_cast<int>(t));
  std::reverse(ready_queue_.begin(), ready_queue_.end());
  drain();
  e.run();
  stats_.unlisted_comms = detached_.unlisted();
}

}  // namespace exasim::detail
