// Collectives into flows (schedules from collectives.hpp).
//  * exhaustive: a rank's n-th collective over a group role meets the n-th collective over that
//    role of every other member of its group (the MPI way; in one program, the same op). It is
//    expanded once all its members have reached it: every member's flows go from its node to
//    the real destination node over the real path, and a step waits for its own previous
//    sends and for the flows it receives (sendrecv semantics).
//  * folded: each representative's side alone, over mapped routes (path_mapping.hpp). When its
//    group holds ranks of other classes whose representatives are slowed (Network::compute_factor
//    or a bandwidth_factor of their links not 1: a straggler among a data-parallel group), it
//    starts once they have reached it: the collective waits for its slow members, as the
//    exhaustive one does through its data. (Classes that differ otherwise, e.g. by their offset in
//    a GPU node, are taken as reaching a collective together, as before.) A ring with a slowed slot
//    runs its first steps, those its class's members run before the late classes' data reaches
//    them, at its own arrival, and the rest once every class has reached it (ring_gate).
//    Consecutive steps over the same folded route merge into one flow carrying their bytes,
//    preceded by a delay carrying the latencies of the merged steps.
#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "sim/collectives.hpp"
#include "sim/group_flows.hpp"
#include "sim/replay.hpp"

namespace exasim::detail {

// Folded: the flow of a run after `prev`. Each step waits for its route's latency, or in a ring
// for the slowest hop of the group's ring when that is larger (the exhaustive ring moves at the
// pace of its slowest hop, e.g. the one pair that crosses the spine); the flow itself carries one
// route latency, the delay the rest.
int Replay::folded_run_flow(int slot, const FoldedRun& run, int prev) {
  const double route_s = paths_.route_latency_s(run.route);
  // hop_latency_s holds the slowest hop's library latency too (Network::message_latency_s): each step
  // pays its own library latency and the larger of its route's and the slowest hop's remainder
  const double step_s = std::max(route_s, run.hop_latency_s - run.message_latency_s);
  const double delay_s = (run.steps - 1 + 2 * run.handshakes) * step_s + (step_s - route_s) + run.posting_s +
                         run.steps * run.message_latency_s + run.bandwidth_lag_s;
  const int t = folded_flow(slot, run.route, run.bytes, delay_s);
  edge(prev, t);
  return t;
}

// Folded: the group's hops from each member to the member `offset` after it (a ring's steps all go
// to the next member: offset 1), cached per group.
const RingHops& Replay::ring_hops(const GroupTable& gt, int group, int offset, const CollectiveWork& c) {
  const auto key = std::make_tuple(&gt, group, offset, c.within_node_step_latency_s, c.between_nodes_step_latency_s);
  auto it = ring_hops_.find(key);
  if (it != ring_hops_.end()) return it->second;
  const auto& members = gt.members[group];
  const size_t n = members.size();
  std::vector<std::pair<double, double>> hops;
  RingHops h;
  h.narrowest_Bps = std::numeric_limits<double>::infinity();
  // around failures (a torus's spare chip, a failed cable's detour) two of the ring's own hops may
  // cross one link: each gets its share of it (the exhaustive ring's flows of one step are
  // concurrent); `simulated` counts the hops on it that representatives send
  std::map<std::pair<int, int>, int> uses, simulated;
  std::vector<LinkRef> links;
  const auto represents = [&](size_t j) {
    return fold_.slot_rank[fold_.slot_of_class.at(folding_class(w_, members[j]))] == members[j];
  };
  if (net_.routes_around_failures())
    for (size_t j = 0; j < n; ++j) {
      links.clear();
      net_.path(w_.node_of_rank[members[j]], w_.node_of_rank[members[(j + offset) % n]], links);
      for (const LinkRef& l : links) uses[{l.kind, l.instance}]++, simulated[{l.kind, l.instance}] += represents(j);
    }
  for (size_t j = 0; j < n; ++j) {
    const int from = w_.node_of_rank[members[j]], to = w_.node_of_rank[members[(j + offset) % n]];
    const double lat_s = paths_.path_latency_s(from, to) + net_.message_latency_s(from, to, c);
    double bw = paths_.path_bandwidth_Bps(from, to, &h.degraded);
    if (!uses.empty()) {
      links.clear();
      net_.path(from, to, links);
      bool shares = false, exact = represents(j);
      for (const LinkRef& l : links) {
        const int k = uses[{l.kind, l.instance}];
        shares = shares || k > 1;
        exact = exact && simulated[{l.kind, l.instance}] == k;
        bw = std::min(bw, net_.link_kinds().at(l.kind).bandwidth_Bps * net_.bandwidth_factor(l.kind, l.instance) / k);
      }
      h.degraded = h.degraded || shares;
      h.shares.push_back(shares);
      h.simulated_share_Bps.push_back(exact ? bw : 0.0);
    }
    h.worst_latency_s = std::max(h.worst_latency_s, lat_s);
    h.narrowest_Bps = std::min(h.narrowest_Bps, bw);
    hops.emplace_back(lat_s, bw);
  }
  // keep the hops no other is at least as slow as on both counts: larger latency first, then
  // each kept hop narrower than every kept one before it
  std::sort(hops.begin(), hops.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (const auto& hop : hops)
    if (h.slowest.empty() || hop.second < h.slowest.back().second) h.slowest.push_back(hop);
  return ring_hops_[key] = std::move(h);
}

// Folded: the route of a single-send step to the member `offset` after slot s's. A ring's hop
// into a domain that does not hold its class counts for the class's hops that one real domain
// folded there receives (PathMap::map_path, `counted`); other steps keep the mirror.
const std::vector<int>& Replay::single_send_route(int s, const CollectiveWork& c, const GroupTable& gt, int offset,
                                                  int src_node, int dst_node) {
  if (c.algorithm != CollectiveAlgorithm::ring) return paths_.route(paths_.route_id(s, src_node, dst_node));
  return paths_.route(paths_.ring_route_id(s, src_node, dst_node, ring_foreign_ranks(gt, offset, s)));
}

// Folded: for slot s's class, the ranks whose hop to the member `offset` after them crosses each
// shared link kind in a domain that does not hold the class, per folded link instance, over the
// real domains folded onto it (what one of them receives on average), cached per (table, offset,
// slot).
const ForeignRanks& Replay::ring_foreign_ranks(const GroupTable& gt, int offset, int s) {
  auto [it, fresh] = ring_foreign_.try_emplace({&gt, offset, s});
  if (!fresh) return it->second;
  ForeignRanks& out = it->second;
  if (ranks_of_class_.empty())
    for (int r = 0; r < w_.rank_count; ++r) ranks_of_class_[folding_class(w_, r)].push_back(r);
  std::vector<LinkRef> links;
  for (int r : ranks_of_class_.at(folding_class(w_, fold_.slot_rank[s]))) {
    const int g = gt.group_of_rank.at(r);
    if (g < 0) continue;
    const auto& members = gt.members[g];
    const int to = members[(gt.index_in_group[r] + offset) % members.size()];
    links.clear();
    net_.path(w_.node_of_rank[r], w_.node_of_rank[to], links);
    for (const LinkRef& l : links) {
      if (net_.link_kinds().at(l.kind).node_private) continue;
      const FoldedDomain& d = fold_.domain.at(l.kind).at(l.instance);
      if (!d.ranks_of_slot.count(s)) out[{l.kind, d.instance}] += 1.0 / d.domains;
    }
  }
  return out;
}

// Folded: what a ring step of `bytes` over the hop src_node -> dst_node lasts less than the
// group's slowest hop's step: max over the hops of (latency + bytes / bandwidth), less the
// slowest latency (already waited, folded_run_flow) and the own hop's transfer: the exhaustive
// ring runs as a pipeline whose period is its slowest hop's step, max over the hops of (latency +
// bytes / bandwidth), not the slowest latency plus the narrowest transfer. So when the own hop is
// the narrowest and a wider hop has the slowest latency, the lag is negative, down to the own
// hop's latency: 16 x 16 torus, cable x_plus 15 failed, the detour 15 -> 31 -> 16 and the hop
// 31 -> 32 each at half of chip 31's x_plus (2 + 19.2 us a step) had waited the 8-link wrap hop
// 127 -> 0's latency first (8 + 19.2 us, where exhaustively 21.2): +4.18 -> +0.12 %; y_plus 0
// +4.05 -> +0.00 %; x_plus 37 +1.09 -> +0.47 %. 0, exactly,
// on a ring none of whose hops crosses a degraded link
// (bandwidth_factor < 1): a fault-free ring mixing NVLink and network hops is left as it was
// (moving it moved tensor-parallel-3d-vs-1d-2d over_2d 0.9125 -> 0.9187, not yet checked against
// exhaustive). Around failures, where the hop's shared links carry only representatives' hops,
// the own transfer is at its share (RingHops::simulated_share_Bps): the folded run simulates that
// share itself, one flow per step (expand_collective_folded). Measured against the unshared
// bandwidth the share was counted twice: a failed cable's detour through the next row's x_plus
// link, which that row's own hop crosses, made both representatives' steps 3 S / B where the
// exhaustive ring's take about 2 S / B (16 x 16 torus, cable x_plus 37: +6.75 % -> +1.09 %).
double Replay::ring_bandwidth_lag_s(const RingHops& h, double bytes, int member, int src_node, int dst_node) const {
  if (!h.degraded) return 0;  // (before the path's bandwidth: a lookup per member and step)
  const double shared_Bps =
      h.simulated_share_Bps.empty() ? 0.0 : h.simulated_share_Bps.at(static_cast<size_t>(member));
  const double own_Bps = shared_Bps > 0 ? shared_Bps : paths_.path_bandwidth_Bps(src_node, dst_node);
  const double lag_s = h.step_s(bytes) - h.worst_latency_s - bytes / own_Bps;
  if (h.narrowest_Bps < own_Bps) return std::max(0.0, lag_s);
  // the own hop is the narrowest: its step lasts the ring's, h.step_s, which is less than the
  // slowest latency plus its own transfer when the slowest latency is a wider hop's (and at least
  // its own latency plus transfer: h.slowest holds the own hop or one slower on both counts)
  return lag_s;
}

// Exhaustive: rank s reaches its side of a collective; the collective is expanded once every
// member of its group has reached it (at the end of the op id where the last one does).
void Replay::join_collective_exhaustive(int s, OpId v, const CollectiveWork& c, int ready) {
  const ProgramInfo& p = prog(s);
  const GroupTable& gt = *p.table[v];
  const int r = fold_.slot_rank[s];
  const int g = gt.group_of_rank.at(r);
  if (g < 0) throw std::runtime_error("rank " + std::to_string(r) + " has no group for role '" + c.group_role + "'");
  const int done = new_task(Task::join);
  op_done_[slot_base_[s] + v] = done;
  participants_.push_back({s, v, ready, done});
  const auto key = std::make_tuple(&gt, g, p.collective_seq[v]);
  auto it = instance_of_.find(key);
  if (it == instance_of_.end()) {
    it = instance_of_.emplace(key, static_cast<int>(instances_.size())).first;
    CollectiveInstance in;
    in.work = &c;
    in.first_op = v;
    in.first_slot = s;
    in.gt = &gt;
    in.group = g;
    in.by_member.assign(gt.members[g].size(), -1);
    instances_.push_back(std::move(in));
  }
  CollectiveInstance& in = instances_[it->second];
  if (c.kind != in.work->kind || c.algorithm != in.work->algorithm || c.bytes != in.work->bytes)
    throw std::runtime_error(describe_op(s, v) + " (" + to_string(c.kind) + ", " + to_string(c.algorithm) + ", " +
                             std::to_string(c.bytes) + " bytes) meets " + describe_op(in.first_slot, in.first_op) +
                             " (" + to_string(in.work->kind) + ", " + to_string(in.work->algorithm) + ", " +
                             std::to_string(in.work->bytes) + " bytes) as the same collective over role '" +
                             c.group_role + "': they must agree");
  in.by_member[gt.index_in_group[r]] = static_cast<int>(participants_.size()) - 1;
  if (++in.arrived == static_cast<int>(in.by_member.size())) complete_instances_.push_back(it->second);
}

// Expands the complete collectives. Their flows are not built now: each member's side becomes
// one task, ready with the member's ready join, that the run holds until the side's last step is
// over (live_collective.cpp creates each step's flows when the step's predecessors are done).
// The routes every flow will take are registered here, since the platform is built before the
// run. Sides in (slot, op) order, steps in order, as the flows used to be built.
void Replay::expand_collectives_exhaustive() {
  struct Side {
    int participant;
    int instance;
  };
  std::vector<Side> sides;
  for (int i : complete_instances_) {
    CollectiveInstance& in = instances_[i];
    const CollectiveWork& c = *in.work;
    in.schedule = static_cast<int>(schedules_.size());
    schedules_.push_back(schedule_of(c, static_cast<int>(in.gt->members[in.group].size()), in.gt->block_size));
    in.first_side = static_cast<int>(sides_.size());
    for (size_t m = 0; m < in.by_member.size(); ++m) {
      LiveSide ls;
      ls.instance = i;
      ls.member = static_cast<int>(m);
      ls.slot = participants_[in.by_member[m]].slot;
      sides_.push_back(ls);
      sides.push_back({in.by_member[m], i});
    }
  }
  complete_instances_.clear();
  std::sort(sides.begin(), sides.end(), [&](const Side& a, const Side& b) {
    const Participant &pa = participants_[a.participant], &pb = participants_[b.participant];
    return pa.slot != pb.slot ? pa.slot < pb.slot : pa.op < pb.op;
  });
  CollectiveStep st;
  std::vector<std::pair<int, int>> side_routes;  // coalescing: the routes this side sends over
  std::vector<long> seen_in_step;                // coalescing: member -> the stamp of the last step sending to it
  long stamp = 0;
  for (const Side& sd : sides) {
    const Participant& part = participants_[sd.participant];
    const CollectiveInstance& in = instances_[sd.instance];
    const CollectiveSchedule& sch = schedules_[in.schedule];
    if (sch.step_count() == 0 || in.work->bytes <= 0) {  // no flow: done once ready
      edge(part.ready, part.done);
      continue;
    }
    const auto& members = in.gt->members[in.group];
    const int r = fold_.slot_rank[part.slot];
    const int m = in.gt->index_in_group[r];
    int last_peer = -1;
    side_routes.clear();
    if (coalesce_ && seen_in_step.size() < members.size()) seen_in_step.resize(members.size(), -1);
    for (int k = 0; k < sch.step_count(); ++k) {
      sch.step(m, k, st);
      stamp++;
      for (const auto& snd : st.sends) {
        if (snd.bytes <= 0) continue;
        const bool again = coalesce_ && seen_in_step[snd.peer] == stamp;  // a second send to one peer in a step
        if (coalesce_) seen_in_step[snd.peer] = stamp;
        if (snd.peer != last_peer || again) {
          const auto eps =
              paths_.exhaustive_endpoints(part.slot, w_.node_of_rank[r], w_.node_of_rank[members[snd.peer]]);
          last_peer = snd.peer;
          if (coalesce_) side_routes.push_back(eps);
          if (again) count_route_sender(eps, 2);
        }
      }
    }
    std::sort(side_routes.begin(), side_routes.end());
    side_routes.erase(std::unique(side_routes.begin(), side_routes.end()), side_routes.end());
    for (const auto& eps : side_routes) count_route_sender(eps, 1);
    const int side = in.first_side + m;
    const int t = new_task(Task::side);
    tasks_[t].ref = side;
    sides_[side].task = t;
    edge(part.ready, t);
    edge(t, part.done);
  }
}

// A folded step's concurrent sends by route: their bytes, and the largest library latency
// (Network::message_latency_s) of the messages on each.
void Replay::step_routes(int s, int src_node, const CollectiveStep& st, const CollectiveWork& c,
                         const std::vector<int>& members,
                         std::map<std::vector<int>, double>& bytes_of_route,
                         std::map<std::vector<int>, double>& latency_of_route) {
  std::map<int, double> by_route_id;
  for (const auto& snd : st.sends) {
    if (snd.bytes <= 0) continue;
    const int dst_node = w_.node_of_rank[members[snd.peer]];
    const int id = paths_.route_id(s, src_node, dst_node, ForeignCount::spread);
    by_route_id[id] += snd.bytes;
    double& lat = latency_of_route[paths_.route(id)];
    lat = std::max(lat, net_.message_latency_s(src_node, dst_node, c));
  }
  for (auto& [id, bytes] : by_route_id) bytes_of_route[paths_.route(id)] += bytes;  // in route order, as before
}

// Folded: the task a representative's collective starts after: `ready`, or a join that also waits
// for other classes' representatives to reach the collective (PendingSync).
int Replay::folded_start(int s, OpId v, const CollectiveWork& c, const GroupTable& gt, int g, int ready,
                         FoldedGate& gate) {
  const int own_class = folding_class(w_, fold_.slot_rank[s]);
  // A ring waits for every member: member j's step k needs member j - 1's step k - 1, so each
  // member's last step ends no earlier than any member's start plus the ring's steps (in
  // lockstep). Where the classes do not reach a collective together, a ring starts once every
  // class of its group has reached it: around failures (the spare's and its row's rings are
  // longer; the 16 x 16 torus case of README's resilience section: -3.58 % -> +1.63 %), and
  // wherever a slot is slowed, since a class that is not slowed itself may be late through
  // another collective it shares with a slowed one (one straggler at 2x on 64 nodes: its
  // group's ranks wait for it in shared_grad_reduce_scatter and reach the cross-supernode
  // shared_grad_all_reduce 81 us after rank 0, which folded did not wait for: -3.44 % -> -2.78 %).
  // Rings only: a pairwise all-to-all's step needs only its peer's data (a start for every class
  // on every collective took two stragglers pairwise on 256 nodes to +4.6 %).
  const bool whole_ring = c.algorithm == CollectiveAlgorithm::ring && classes_of_group(gt, g).size() > 1 &&
                          (net_.routes_around_failures() || any_slot_slowed_);
  if (!whole_ring && !group_has_other_slowed_class(gt, g, own_class)) return ready;
  const int start = new_task(Task::join);
  edge(ready, start);
  syncs_.push_back({start, &gt, g, prog(s).collective_seq[v], own_class, whole_ring});
  if (whole_ring && !net_.routes_around_failures()) gate = ring_gate(s, c, gt, g, start);
  return gate.early_steps > 0 ? ready : start;
}

// Folded ring with a slowed slot: the steps its class's members run before the other classes'
// data reaches them. Member m's step k needs members m - 1 .. m - k to have reached the ring (their
// data comes around); a member whose d nearest members upstream are of its class runs steps 0 .. d
// at its own arrival, as the exhaustive ring's early members do while a straggler is on its way
// (their flows meet the other traffic on their NICs then). The representative runs its class's
// mean of those early steps (over its members in every group of the role, to the nearest step), then the rest once every class has reached the ring and the latest
// one's data has come the same number of hops (early steps x the ring's step): its last step ends
// as the ring's does, that arrival plus every step.
FoldedGate Replay::ring_gate(int s, const CollectiveWork& c, const GroupTable& gt, int g, int sync) {
  FoldedGate gate;
  const int n = static_cast<int>(gt.members[g].size()), own_class = folding_class(w_, fold_.slot_rank[s]);
  if (ranks_of_class_.empty())
    for (int r = 0; r < w_.rank_count; ++r) ranks_of_class_[folding_class(w_, r)].push_back(r);
  long early = 0, count = 0;
  for (int r : ranks_of_class_.at(own_class)) {  // every member of the class, in whichever group of the role
    const int gr = gt.group_of_rank.at(r);
    if (gr < 0) continue;
    const auto& members = gt.members[gr];
    const int size = static_cast<int>(members.size()), j = gt.index_in_group[r];
    int d = 0;
    while (d < size - 1 && folding_class(w_, members[((j - d - 1) % size + size) % size]) == own_class) d++;
    early += d + 1, count++;
  }
  const CollectiveSchedule sch = schedule_of(c, n, gt.block_size);
  gate.early_steps = static_cast<int>(std::min<long>((early + count / 2) / count, sch.step_count()));
  CollectiveStep st;
  sch.critical_step(gt.index_in_group[fold_.slot_rank[s]], 0, st);
  const double bytes = st.sends.size() == 1 ? st.sends[0].bytes : 0;
  gate.fill_s = gate.early_steps * ring_hops(gt, g, 1, c).step_s(bytes);
  gate.sync = sync;
  return gate;
}

// Folded ring: the join after which a representative's steps from gate.early_steps on run, once its
// early steps (`prev`) are over and gate.fill_s has passed since every class reached the ring (a
// flow without bytes: a delay alone).
int Replay::pass_gate(int s, const FoldedGate& gate, int prev, int src_node, int dst_node) {
  const int join = new_task(Task::join);
  edge(prev, join);
  int after = gate.sync;
  if (gate.fill_s > 0) {
    const auto [src_ep, dst_ep] = paths_.folded_endpoints(s, paths_.route(paths_.route_id(s, src_node, dst_node)));
    after = flow_task(src_ep, dst_ep, 0, gate.fill_s);
    edge(gate.sync, after);
  }
  edge(after, join);
  return join;
}

void Replay::expand_collective_folded(int s, OpId v, const CollectiveWork& c, int ready) {
  const GroupTable& gt = *prog(s).table[v];
  const int r = fold_.slot_rank[s];
  const int g = gt.group_of_rank.at(r);
  if (g < 0) throw std::runtime_error("rank " + std::to_string(r) + " has no group for role '" + c.group_role + "'");
  FoldedGate gate;
  int prev = folded_start(s, v, c, gt, g, ready, gate);
  const int start = gate.early_steps > 0 ? gate.sync : prev;
  const FoldedFlowsKey key{s, &gt, g, static_cast<int>(c.kind), static_cast<int>(c.algorithm), c.bytes,
                           c.wire_bytes_factor, c.base_latency_s, c.within_node_step_latency_s,
                           c.between_nodes_step_latency_s, c.tree_members_per_node, c.tree_chunks};
  auto known = gate.early_steps > 0 ? folded_flows_.end() : folded_flows_.find(key);
  if (known != folded_flows_.end()) {
    for (const FlowInfo& f : known->second) {
      const int t = flow_task(f.src, f.dst, f.amount, f.delay_s);
      edge(prev, t);
      prev = t;
    }
  } else {
    std::vector<FlowInfo> flows;
    bool reusable = true;
    prev = expand_folded_steps(s, c, gt, g, prev, flows, reusable, gate);
    if (reusable && gate.early_steps <= 0) folded_flows_.emplace(key, std::move(flows));
  }
  const int done = new_task(Task::join);
  edge(prev, done);
  const int n = static_cast<int>(gt.members[g].size());
  if (n > 1 && (c.algorithm == CollectiveAlgorithm::tree || c.algorithm == CollectiveAlgorithm::ring))
    folded_member_wait(s, schedule_of(c, n, gt.block_size), c, gt, g, start, done);
  op_done_[slot_base_[s] + v] = done;
}

// The representative's steps of its collective as flows after `prev`; returns the last. `flows`
// gets each run's flow; `reusable` is cleared by a step of many sends (flows in parallel, joined).
int Replay::expand_folded_steps(int s, const CollectiveWork& c, const GroupTable& gt, int g, int prev,
                                std::vector<FlowInfo>& flows, bool& reusable, const FoldedGate& gate) {
  CollectiveStep st;
  const int r = fold_.slot_rank[s];
  const auto& members = gt.members[g];
  const CollectiveSchedule sch = schedule_of(c, static_cast<int>(members.size()), gt.block_size);
  const int m = gt.index_in_group[r];
  const int src_node = w_.node_of_rank[r];
  // the current run of consecutive single-flow steps over one route
  FoldedRun run;
  auto flush = [&]() {
    if (run.steps == 0) return;
    prev = folded_run_flow(s, run, prev), run = FoldedRun{};
    flows.push_back(flows_[tasks_[prev].ref]);
  };
  const int n = static_cast<int>(members.size());
  double base_s = c.base_latency_s;  // the library's per-collective latency, before the first flow
  const RingHops* hops = nullptr;  // a ring's hops to the member `hops_offset` after each
  int hops_offset = -1;
  for (int k = 0; k < sch.step_count(); ++k) {
    if (gate.early_steps > 0 && k == gate.early_steps) {  // the later steps wait for every class (ring_gate)
      flush();
      prev = pass_gate(s, gate, prev, src_node, w_.node_of_rank[members[(m + 1) % n]]);
    }
    sch.critical_step(m, k, st);  // the representative stands for its class: the critical path's sends
    if (st.sends.size() == 1) {
      const auto& snd = st.sends[0];
      if (snd.bytes <= 0) continue;
      const int dst_node = w_.node_of_rank[members[snd.peer]];
      const int offset = ((snd.peer - m) % n + n) % n;
      const std::vector<int>& route = single_send_route(s, c, gt, offset, src_node, dst_node);
      if (c.algorithm == CollectiveAlgorithm::ring && offset != hops_offset)  // a ring's steps share one offset
        hops = &ring_hops(gt, g, offset, c), hops_offset = offset;
      // a degraded shared link, or a ring hop around failures on a link another hop crosses: one
      // flow per step (FoldedRun, replay.hpp), so that representatives' flows on it meet step by
      // step as the exhaustive ring's do, not as merged runs after unequal delays
      const bool per_step = hops && !hops->shares.empty() && hops->shares.at(static_cast<size_t>(m));
      if (run.steps > 0 &&
          (route != run.route || paths_.crosses_degraded_shared_link(route) || per_step || run.per_step))
        flush();
      run.per_step = per_step;
      if (run.steps == 0) run.route = route;  // else the same route (else flushed above)
      run.bytes += snd.bytes;
      run.steps++;
      run.posting_s += posting_s(snd.bytes) + base_s;
      base_s = 0;
      run.handshakes += net_.rendezvous(snd.bytes) ? 1 : 0;
      run.message_latency_s = net_.message_latency_s(src_node, dst_node, c);  // one route: one hop kind
      if (hops) {
        run.hop_latency_s = std::max(run.hop_latency_s, hops->worst_latency_s);
        run.bandwidth_lag_s += ring_bandwidth_lag_s(*hops, snd.bytes, m, src_node, dst_node);
      }
      continue;
    }
    flush();
    // a step with many concurrent sends: one flow per distinct route, all after `prev`
    std::map<std::vector<int>, double> by_route, latency_of_route;
    step_routes(s, src_node, st, c, members, by_route, latency_of_route);
    double step_posting_s = 0;  // every flow starts once all are posted
    bool step_rendezvous = false;  // the handshakes overlap: one round trip for the step's flows
    for (const auto& snd : st.sends) step_posting_s += posting_s(snd.bytes), step_rendezvous |= net_.rendezvous(snd.bytes);
    if (by_route.empty()) continue;
    reusable = false;
    const int join = new_task(Task::join);
    for (auto& [route, bytes] : by_route) {
      FoldedRun one;
      one.route = route;
      one.bytes = bytes;
      one.steps = 1;
      one.posting_s = step_posting_s + base_s;
      one.handshakes = step_rendezvous ? 1 : 0;
      one.message_latency_s = latency_of_route[route];
      edge(folded_run_flow(s, one, prev), join);
    }
    prev = join;
    base_s = 0;
  }
  flush();
  return prev;
}

// Folded tree, and a ring around failures whose hops share a link: the representative's collective
// is not over before the last end among the group's members of its class (group_member_end_s; the
// members of a class sit at different places in the trees or the ring, and the representative
// stands for the slowest), waited for as a flow without bytes from the start: a delay alone
// (part_done), which no route latency lengthens.
void Replay::folded_member_wait(int s, const CollectiveSchedule& sch, const CollectiveWork& c, const GroupTable& gt,
                                int g, int start, int done) {
  const bool every_link = c.algorithm == CollectiveAlgorithm::ring && ring_shares_links(gt, g, c);
  if (c.algorithm != CollectiveAlgorithm::tree && !every_link) return;
  const auto& members = gt.members[g];
  const int r = fold_.slot_rank[s], own_class = folding_class(w_, r);
  const int m = gt.index_in_group[r], n = static_cast<int>(members.size());
  const std::vector<double>& end_s = group_member_end_s(sch, c, gt, g, every_link);
  double wait_s = 0;
  for (int j = 0; j < n; ++j)
    if (folding_class(w_, members[j]) == own_class) wait_s = std::max(wait_s, end_s[j]);
  const int src_node = w_.node_of_rank[r], dst_node = w_.node_of_rank[members[(m + 1) % n]];
  const auto [src_ep, dst_ep] = paths_.folded_endpoints(s, paths_.route(paths_.route_id(s, src_node, dst_node)));
  const int t = flow_task(src_ep, dst_ep, 0, wait_s);
  edge(start, t);
  edge(t, done);
}

// Whether a ring's hops (each member to the next) around failures cross a link two of them share
// (a failed cable's detour onto the next row's link; ring_hops).
bool Replay::ring_shares_links(const GroupTable& gt, int group, const CollectiveWork& c) {
  if (!net_.routes_around_failures()) return false;
  const RingHops& h = ring_hops(gt, group, 1, c);
  return std::any_of(h.shares.begin(), h.shares.end(), [](bool b) { return b; });
}

// Folded: each member's end of a tree collective, or of a ring around failures (every_link), the
// group's flows simulated alone as the exhaustive run takes them (sim/group_flows.hpp). A tree:
// the members' own links (NIC, NVLink) shared max-min, the switches' links uncontended. A ring
// around failures: every link shared, each flow's share of a link inversely proportional to its
// route's latency, as SimGrid's CM02 shares it (its sharing penalty is the route's latency). On
// the 16 x 16 torus with cable x_plus 0 failed, the detour 0 -> 16 -> 17 -> 1 (three hops) gets
// 1/4 of chip 16's x_plus against the one-hop 16 -> 17 and 2/5 of chip 0's y_plus against the
// two-hop 15 -> 16, not half: exhaustively its steps take 27.5 us, where a folded ring's lockstep
// at half took 23.2 us (README, resilience). Cached per group and collective.
const std::vector<double>& Replay::group_member_end_s(const CollectiveSchedule& sch, const CollectiveWork& c,
                                                     const GroupTable& gt, int group, bool every_link) {
  const auto key = std::make_tuple(&gt, group, wire_bytes(c), c.tree_chunks, c.tree_members_per_node,
                                   c.within_node_step_latency_s, c.between_nodes_step_latency_s, c.base_latency_s,
                                   static_cast<int>(c.kind), every_link);
  auto it = group_ends_.find(key);
  if (it != group_ends_.end()) return it->second;
  const auto& members = gt.members[group];
  std::map<std::pair<int, int>, int> link_ids;  // (kind, instance) of a contended link -> its id
  std::vector<LinkRef> refs;
  return group_ends_[key] = group_flow_end_s(sch, [&](int from, int to) {
    const int a = w_.node_of_rank[members[from]], b = w_.node_of_rank[members[to]];
    GroupFlowPath p;
    p.latency_s = net_.message_latency_s(a, b, c);
    p.bandwidth_Bps = std::numeric_limits<double>::infinity();
    refs.clear();
    net_.path(a, b, refs);
    double route_s = 0;
    for (const LinkRef& l : refs) {
      const LinkKind& k = net_.link_kinds().at(l.kind);
      const double bw = k.bandwidth_Bps * net_.bandwidth_factor(l.kind, l.instance);
      route_s += k.latency_s;
      if (k.node_private || every_link)
        p.links.emplace_back(link_ids.emplace(std::make_pair(l.kind, l.instance), static_cast<int>(link_ids.size())).first->second, bw);
      else
        p.bandwidth_Bps = std::min(p.bandwidth_Bps, bw);
    }
    p.latency_s += route_s;
    if (every_link && route_s > 0) p.weight = 1e-6 / route_s;
    return p;
  }, c.base_latency_s);
}

// The folding classes of a group's members, in increasing order.
const std::vector<int>& Replay::classes_of_group(const GroupTable& gt, int group) {
  auto [it, fresh] = classes_of_group_.try_emplace({&gt, group});
  if (fresh) {
    for (int r : gt.members[group]) it->second.push_back(folding_class(w_, r));
    std::sort(it->second.begin(), it->second.end());
    it->second.erase(std::unique(it->second.begin(), it->second.end()), it->second.end());
  }
  return it->second;
}

bool Replay::node_slowed(int node) const {
  if (net_.compute_factor(node) != 1) return true;
  for (size_t k = 0; k < net_.link_kinds().size(); ++k)
    if (net_.bandwidth_factor(static_cast<int>(k), net_.domain_of(static_cast<int>(k), node)) != 1) return true;
  return false;
}

// Whether the group holds a class other than own_class whose representative is slowed.
bool Replay::group_has_other_slowed_class(const GroupTable& gt, int group, int own_class) {
  auto [it, fresh] = slowed_classes_of_group_.try_emplace({&gt, group});
  if (fresh)
    for (int c : classes_of_group(gt, group))
      if (slot_slowed_[fold_.slot_of_class.at(c)]) it->second.push_back(c);
  const auto& v = it->second;
  return v.size() > 1 || (v.size() == 1 && v[0] != own_class);
}

// A folded collective starts once the slowed classes' representatives have reached it.
void Replay::resolve_sync(const PendingSync& p) {
  for (int c : p.every_class ? classes_of_group(*p.gt, p.group) : slowed_classes_of_group_.at({p.gt, p.group})) {
    if (c == p.own_class) continue;
    const int rep = fold_.slot_of_class.at(c);
    const auto& ops = prog(rep).collective_by_seq;
    auto it = ops.find({p.gt, p.seq});
    if (it == ops.end())
      throw std::runtime_error("folded fidelity: rank " + std::to_string(fold_.slot_rank[rep]) + " (class " +
                               std::to_string(c) + ") has no collective number " + std::to_string(p.seq) +
                               " over the role of its group (the n-th collective over a role must exist on every member)");
    edge(op_ready_[slot_base_[rep] + it->second], p.start);
  }
}

}  // namespace exasim::detail
