// Exhaustive collectives' steps, created during the run (issue 18: memory follows the live
// frontier, not the whole step). A member's side of a collective is one task of the DAG; when it
// starts (the member's ready join is done), its step 0 is released: its flows are created and
// launched. Step k+1 of a side is released once the side's own step-k sends are done and the
// step-k flows it receives have arrived (sendrecv semantics, as collectives.hpp describes); the
// side task completes once its last step's flows are over. A flow that arrives before its receiver
// has released that step (the sender ran ahead) is counted in the receiver's `early`.
//
// This is the DAG the flows used to be built into before the run, with the same dependencies:
// only when the tasks exist changes. A side's steps are released in order; a step in which the member
// neither sends nor waits for a receive (collectives.hpp: halving and doubling off a power of two)
// is passed at once.
//
// Coalescing independent flows (EngineOptions::coalesce_independent_flows). A route is exclusive
// when one collective side alone sends over it (one flow at a time: a side's step k+1 starts once
// its step-k sends are over, and it never sends twice to one peer in a step) and no other route
// of the platform uses any of its links: no other flow can ever share a link with its flows, so
// each runs alone at its route's narrowest bandwidth after its route's latency. Flows over
// exclusive routes whose links have the same bandwidths and latencies in the same order (the
// route's signature), started from one drain (one instant, nothing else started between them)
// with the same bytes, therefore end at the same instant, each computed by SimGrid with the same
// arithmetic: the first one's comm carries them all (the others are its next_in_comm chain,
// completed in launch order when it ends), and the max-min solver sees one variable instead of
// n. A ring step on a non-blocking switch (the n flows of a step, each from a node's up-link to
// its neighbour's down-link) is one comm instead of n.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "sim/replay.hpp"

namespace exasim::detail {

void Replay::count_route_sender(const std::pair<int, int>& eps, int senders) {
  if (coalesce_) route_senders_[eps] += senders;
}

// Once every route is known (before the platform is built): the exclusive routes' signatures.
void Replay::find_exclusive_routes() {
  if (!coalesce_) return;
  for (size_t i = 0; i < flows_.size(); ++i) count_route_sender({flows_[i].src, flows_[i].dst}, 2);
  std::vector<int> uses(paths_.links().size(), 0);
  for (const auto& [eps, route] : paths_.routes())
    for (int l : route) uses[l]++;
  std::map<std::vector<std::pair<double, double>>, int> ids;
  for (const auto& [eps, senders] : route_senders_) {
    const std::vector<int>& route = paths_.routes().at(eps);
    if (senders != 1 || route.empty() ||
        !std::all_of(route.begin(), route.end(), [&](int l) { return uses[l] == 1; }))
      continue;
    std::vector<std::pair<double, double>> sig;
    for (int l : route) sig.emplace_back(paths_.links()[l].bandwidth_Bps, paths_.links()[l].latency_s);
    exclusive_signature_[eps] = ids.emplace(std::move(sig), static_cast<int>(ids.size())).first->second;
  }
  route_senders_.clear();
}

int Replay::exclusive_signature(const std::pair<int, int>& eps) const {
  const auto it = exclusive_signature_.find(eps);
  return it == exclusive_signature_.end() ? -1 : it->second;
}

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
// step with nothing left to wait for (an idle member's: the halving and doubling algorithms off a
// power of two, a tree member idle in it, collectives.hpp; or one whose receives arrived early) is
// over at once.
void Replay::release_step(int side) {
  const CollectiveInstance& in = instances_[sides_[side].instance];
  const CollectiveSchedule& sch = schedules_[in.schedule];
  CollectiveStep& st = step_scratch_;  // reused: no allocation per step
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

// The flows member `side` sends in step k, created and queued to launch; returns how many.
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
    if (snd.peer != ls.hop_peer) {
      const int dst_node = w_.node_of_rank[members[snd.peer]];
      const auto eps = paths_.exhaustive_endpoints(ls.slot, src_node, dst_node);
      ls.hop_peer = snd.peer;
      ls.hop_src_ep = eps.first;
      ls.hop_dst_ep = eps.second;
      ls.hop_route_latency_s = paths_.route_latency_s(paths_.routes().at(eps));
      ls.hop_message_latency_s = net_.message_latency_s(src_node, dst_node, *in.work);
      ls.hop_signature = exclusive_signature(eps);
    }
    const int t = new_live_flow();
    LiveFlow& f = live_flows_[-1 - t];
    f.task.kind = Task::flow;
    f.info.src = ls.hop_src_ep;
    f.info.dst = ls.hop_dst_ep;
    f.info.amount = snd.bytes;
    f.signature = ls.hop_signature;
    f.info.delay_s = posted_s + handshake_s(snd.bytes, ls.hop_route_latency_s) + ls.hop_message_latency_s;
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
