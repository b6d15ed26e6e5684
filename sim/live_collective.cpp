// Exhaustive collectives' steps, created during the run (issue 18: memory follows the live
// frontier, not the whole step). A member's side of a collective is one task of the DAG; when it
// starts (the member's ready join is done), its step 0 is released: its flows are created and
// launched. Step k+1 of a side is released once the side's own step-k sends are done and the
// step-k flows it receives have arrived (sendrecv semantics, as collectives.hpp describes); the
// side task completes once its last step's flows are over. A flow that arrives before its receiver
// has released that step (the sender ran ahead) is counted in the receiver's `early`.
//
// This is the DAG the flows used to be built into before the run, with the same dependencies:
// only when the tasks exist changes. Every step of a collective with bytes has at least one send
// per member (collectives.cpp), so a side's steps are released in order.
#include <stdexcept>
#include <string>

#include "sim/replay.hpp"

namespace exasim::detail {

int Replay::new_live_flow() {
  if (free_flows_.empty()) {
    live_flows_.emplace_back();
    return -static_cast<int>(live_flows_.size());
  }
  const int i = free_flows_.back();
  free_flows_.pop_back();
  live_flows_[i] = LiveFlow{};
  return -1 - i;
}

void Replay::start_side(int side) {
  if (sides_[side].step != -1) throw std::logic_error("collective side started twice");
  release_step(side);
}

// Creates the flows of the side's next step, queued to launch; counts what the step waits for. A
// step with nothing to send or receive (a tree member idle in it) is over at once.
void Replay::release_step(int side) {
  const CollectiveInstance& in = instances_[sides_[side].instance];
  const CollectiveSchedule& sch = schedules_[in.schedule];
  CollectiveStep st;
  for (;;) {
    LiveSide& ls = sides_[side];
    const int k = ++ls.step;
    sch.step(ls.member, k, st);
    const int sends = launch_step_flows(side, k, st);
    ls.left = sends + static_cast<int>(st.recv_from.size());
    if (!ls.early.empty()) {
      ls.left -= ls.early.front();
      ls.early.erase(ls.early.begin());
    }
    if (ls.left < 0 || (ls.left == 0 && sends > 0))
      throw std::logic_error("exhaustive collective: a step received more flows than it expects");
    if (ls.left > 0) return;
    if (ls.step + 1 >= sch.step_count()) {
      std::vector<int>().swap(ls.early);
      complete(ls.task);
      return;
    }
  }
}

// Queues the flows of step k of a side; returns how many.
int Replay::launch_step_flows(int side, int k, const CollectiveStep& st) {
  LiveSide& ls = sides_[side];
  const CollectiveInstance& in = instances_[ls.instance];
  const auto& members = in.gt->members[in.group];
  const int src_node = w_.node_of_rank[fold_.slot_rank[ls.slot]];
  double posted_s = 0;
  int sends = 0;
  for (const auto& snd : st.sends) posted_s += posting_s(snd.bytes);  // the sender posts them one by one
  for (const auto& snd : st.sends) sends += snd.bytes > 0 ? 1 : 0;
  if (sends > 0 && !ls.sent) posted_s += in.work->base_latency_s;  // the library's per-collective latency, once
  if (sends > 0) ls.sent = true;
  for (const auto& snd : st.sends) {
    if (snd.bytes <= 0) continue;
    const int dst_node = w_.node_of_rank[members[snd.peer]];
    const auto eps = paths_.exhaustive_endpoints(ls.slot, src_node, dst_node);
    const int t = new_live_flow();
    LiveFlow& f = live_flows_[-1 - t];
    f.task.kind = Task::flow;
    f.info.src = eps.first;
    f.info.dst = eps.second;
    f.info.amount = snd.bytes;
    f.info.delay_s = posted_s + handshake_s(snd.bytes, paths_.routes().at(eps)) + net_.message_latency_s(src_node, dst_node, *in.work);
    f.from_side = side;
    f.to_side = in.first_side + snd.peer;
    f.step = k;
    ready_queue_.push_back(t);
  }
  return sends;
}

// One flow of step `step` that the side sent or received is over.
void Replay::flow_arrived(int side, int step) {
  LiveSide& ls = sides_[side];
  if (step > ls.step) {
    const size_t j = static_cast<size_t>(step - ls.step - 1);
    if (ls.early.size() <= j) ls.early.resize(j + 1, 0);
    ls.early[j]++;
    return;
  }
  if (step < ls.step) throw std::logic_error("exhaustive collective: a flow arrived for a step already over");
  if (--ls.left > 0) return;
  const CollectiveSchedule& sch = schedules_[instances_[ls.instance].schedule];
  if (ls.step + 1 < sch.step_count()) {
    release_step(side);
    return;
  }
  std::vector<int>().swap(ls.early);
  complete(ls.task);
}

// A live flow has arrived: its sender and receiver sides move on, and it is recycled.
void Replay::live_flow_done(int t) {
  const int i = -1 - t;
  const LiveFlow f = live_flows_[i];
  free_flows_.push_back(i);
  last_flow_end_s_ = simgrid::s4u::Engine::get_clock();
  flow_arrived(f.from_side, f.step);
  flow_arrived(f.to_side, f.step);
}

}  // namespace exasim::detail
