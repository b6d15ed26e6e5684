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
//    a GPU node, are taken as reaching a collective together, as before.)
//    Consecutive steps over the same folded route merge into one flow carrying their bytes,
//    preceded by a delay carrying the latencies of the merged steps.
#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "sim/collectives.hpp"
#include "sim/replay.hpp"

namespace exasim::detail {

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

// The flows of one member's side of an exhaustive collective: per step, (destination member, flow task).
void Replay::side_flows(const CollectiveInstance& in, int slot, const CollectiveSchedule& sch,
                        std::vector<std::vector<std::pair<int, int>>>& out) {
  const auto& members = in.gt->members[in.group];
  const int r = fold_.slot_rank[slot];
  const int m = in.gt->index_in_group[r];
  CollectiveStep st;
  out.resize(sch.step_count());
  for (int k = 0; k < sch.step_count(); ++k) {
    sch.step(m, k, st);
    double posted_s = 0;  // the sender posts them one by one
    for (const auto& snd : st.sends) posted_s += posting_s(snd.bytes);
    for (const auto& snd : st.sends) {
      if (snd.bytes <= 0) continue;
      const int src_node = w_.node_of_rank[r], dst_node = w_.node_of_rank[members[snd.peer]];
      const auto [src_ep, dst_ep] = paths_.exhaustive_endpoints(slot, src_node, dst_node);
      out[k].push_back({snd.peer, flow_task(src_ep, dst_ep, snd.bytes, posted_s + net_.message_latency_s(src_node, dst_node))});
    }
  }
}

// Expands the complete collectives: every member's side, slot by slot. A step k of a member
// waits for its own step k-1 sends and the step k-1 flows it receives (sendrecv semantics).
void Replay::expand_collectives_exhaustive() {
  struct Side {
    int participant;
    int instance;
  };
  std::vector<Side> sides;
  for (int i : complete_instances_)
    for (int part : instances_[i].by_member) sides.push_back({part, i});
  complete_instances_.clear();
  std::sort(sides.begin(), sides.end(), [&](const Side& a, const Side& b) {
    const Participant &pa = participants_[a.participant], &pb = participants_[b.participant];
    return pa.slot != pb.slot ? pa.slot < pb.slot : pa.op < pb.op;
  });
  std::unordered_map<int, int> side_of;  // participant -> index in sides
  for (size_t i = 0; i < sides.size(); ++i) side_of[sides[i].participant] = static_cast<int>(i);
  std::vector<CollectiveSchedule> schedules;  // per side
  // sends[side][k] = list of (destination member, flow task)
  std::vector<std::vector<std::vector<std::pair<int, int>>>> sends(sides.size());
  for (size_t i = 0; i < sides.size(); ++i) {
    const CollectiveInstance& in = instances_[sides[i].instance];
    const CollectiveWork& c = *in.work;
    schedules.emplace_back(c.kind, c.algorithm, static_cast<int>(in.gt->members[in.group].size()), c.bytes,
                           in.gt->block_size);
    side_flows(in, participants_[sides[i].participant].slot, schedules.back(), sends[i]);
  }
  CollectiveStep st;
  // The step-k flows that side i receives.
  auto received = [&](size_t i, int k, std::vector<int>& out) {
    const CollectiveInstance& in = instances_[sides[i].instance];
    const int r = fold_.slot_rank[participants_[sides[i].participant].slot];
    const int m = in.gt->index_in_group[r];
    schedules[i].step(m, k, st);
    for (int q : st.recv_from) {
      const int qi = side_of.at(in.by_member[q]);
      for (auto& [peer, t] : sends[qi][k])
        if (peer == m) out.push_back(t);
    }
  };
  std::vector<int> rec;
  for (size_t i = 0; i < sides.size(); ++i) {
    const Participant& part = participants_[sides[i].participant];
    const int ready = part.ready, done = part.done;
    const int K = static_cast<int>(sends[i].size());
    if (K == 0) {
      edge(ready, done);
      continue;
    }
    for (int k = 0; k < K; ++k) {
      std::vector<int> deps;
      if (k == 0) {
        deps.push_back(ready);
      } else {
        for (auto& p : sends[i][k - 1]) deps.push_back(p.second);
        rec.clear();
        received(i, k - 1, rec);
        deps.insert(deps.end(), rec.begin(), rec.end());
        if (sends[i][k - 1].empty() && rec.empty()) deps.push_back(ready);
      }
      for (auto& p : sends[i][k])
        for (int d : deps) edge(d, p.second);
    }
    for (auto& p : sends[i][K - 1]) edge(p.second, done);
    rec.clear();
    received(i, K - 1, rec);
    for (int t : rec) edge(t, done);
    edge(ready, done);
  }
}

// A folded step's concurrent sends by route: their bytes, and the largest library latency
// (Network::message_latency_s) of the messages on each.
void Replay::step_routes(int s, int src_node, const CollectiveStep& st, const std::vector<int>& members,
                         std::map<std::vector<int>, double>& bytes_of_route,
                         std::map<std::vector<int>, double>& latency_of_route) {
  std::map<int, double> by_route_id;
  for (const auto& snd : st.sends) {
    if (snd.bytes <= 0) continue;
    const int dst_node = w_.node_of_rank[members[snd.peer]];
    const int id = paths_.route_id(s, src_node, dst_node);
    by_route_id[id] += snd.bytes;
    double& lat = latency_of_route[paths_.route(id)];
    lat = std::max(lat, net_.message_latency_s(src_node, dst_node));
  }
  for (auto& [id, bytes] : by_route_id) bytes_of_route[paths_.route(id)] += bytes;  // in route order, as before
}

void Replay::expand_collective_folded(int s, OpId v, const CollectiveWork& c, int ready) {
  const GroupTable& gt = *prog(s).table[v];
  CollectiveStep st;
  const int r = fold_.slot_rank[s];
  const int g = gt.group_of_rank.at(r);
  if (g < 0) throw std::runtime_error("rank " + std::to_string(r) + " has no group for role '" + c.group_role + "'");
  const auto& members = gt.members[g];
  const CollectiveSchedule sch(c.kind, c.algorithm, static_cast<int>(members.size()), c.bytes, gt.block_size);
  const int m = gt.index_in_group[r];
  const int src_node = w_.node_of_rank[r];
  int prev = ready;
  const int own_class = folding_class(w_, r);
  if (group_has_other_slowed_class(gt, g, own_class)) {
    prev = new_task(Task::join);
    edge(ready, prev);
    syncs_.push_back({prev, &gt, g, prog(s).collective_seq[v], own_class});
  }
  // the current run of consecutive single-flow steps over one route
  std::vector<int> run_route;
  double run_bytes = 0;
  int run_steps = 0;
  // the sender's cost of posting the run's steps' messages (posting_s each) and their library latencies
  double run_posting_s = 0;
  auto flush = [&]() {
    if (run_steps == 0) return;
    const double delay = (run_steps - 1) * paths_.route_latency_s(run_route) + run_posting_s;
    const int t = folded_flow(s, run_route, run_bytes, delay);
    edge(prev, t);
    prev = t;
    run_steps = 0;
    run_bytes = 0;
    run_posting_s = 0;
  };
  for (int k = 0; k < sch.step_count(); ++k) {
    sch.step(m, k, st);
    if (st.sends.size() == 1) {
      const auto& snd = st.sends[0];
      if (snd.bytes <= 0) continue;
      const int dst_node = w_.node_of_rank[members[snd.peer]];
      const std::vector<int>& route = paths_.route(paths_.route_id(s, src_node, dst_node));
      if (run_steps > 0 && route != run_route) flush();
      run_route = route;
      run_bytes += snd.bytes;
      run_steps++;
      run_posting_s += posting_s(snd.bytes) + net_.message_latency_s(src_node, dst_node);
      continue;
    }
    flush();
    // a step with many concurrent sends: one flow per distinct route, all after `prev`
    std::map<std::vector<int>, double> by_route, latency_of_route;
    step_routes(s, src_node, st, members, by_route, latency_of_route);
    double step_posting_s = 0;  // every flow starts once all are posted
    for (const auto& snd : st.sends) step_posting_s += posting_s(snd.bytes);
    if (by_route.empty()) continue;
    const int join = new_task(Task::join);
    for (auto& [route, bytes] : by_route) {
      run_route = route;
      run_bytes = bytes;
      run_steps = 1;
      run_posting_s = step_posting_s + latency_of_route[route];
      const int before = prev;
      flush();  // sets prev to the new flow
      edge(prev, join);
      prev = before;
    }
    prev = join;
  }
  flush();
  const int done = new_task(Task::join);
  edge(prev, done);
  op_done_[slot_base_[s] + v] = done;
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
  for (int c : slowed_classes_of_group_.at({p.gt, p.group})) {
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
