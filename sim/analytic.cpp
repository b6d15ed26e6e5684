#include "sim/analytic.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <variant>

#include "sim/collectives.hpp"

namespace exasim {

namespace {

// Algorithms whose steps go to partners of their own (not the ring's next member).
bool stepwise(const CollectiveWork& c) {
  return c.algorithm == CollectiveAlgorithm::rabenseifner || c.algorithm == CollectiveAlgorithm::recursive_doubling ||
         (c.algorithm == CollectiveAlgorithm::pairwise && c.kind != CollectiveKind::all_to_all);
}

}  // namespace

const GroupTable& AlphaBetaCosts::table(const std::string& role) const {
  auto it = w_.groups.find(role);
  if (it == w_.groups.end()) throw std::runtime_error("workload has no group role '" + role + "'");
  return it->second;
}

double AlphaBetaCosts::collective_end_s(double ready_s, const CollectiveWork& c, int r) {
  const GroupTable& gt = table(c.group_role);
  const int gi = gt.group_of_rank.at(r);
  const int n = static_cast<int>(gt.members.at(gi).size());
  if (n <= 1 || c.bytes <= 0) return ready_s;
  // Every step waits for the slowest ring neighbour pair (e.g. the one pair of a data-parallel
  // ring over consecutive GPUs that leaves its node).
  const CollectiveSchedule sch = schedule_of(c, n, gt.block_size);
  return ready_s + c.base_latency_s + collective_time_s(sch, c, gt, gi, gt.index_in_group[r]) +
         sch.messages_per_member() * net_.message_overhead_s() +
         protocol_s(sch, gt.index_in_group[r], slowest_ring_pair(gt, gi, c).latency_s);
}

double AlphaBetaCosts::member_sent_bytes(const CollectiveWork& c, int r) {
  const GroupTable& gt = table(c.group_role);
  const int gi = gt.group_of_rank.at(r);
  const int n = static_cast<int>(gt.members.at(gi).size()), m = gt.index_in_group[r];
  if (n <= 1 || c.bytes <= 0) return 0;
  const auto key = std::make_tuple(&gt, n, c.kind, c.algorithm, wire_bytes(c), m);
  auto it = sent_bytes_.find(key);
  if (it != sent_bytes_.end()) return it->second;
  const CollectiveSchedule sch = schedule_of(c, n, gt.block_size);
  std::vector<CollectiveStep::Send> out;
  double sent = 0;
  for (int k = 0; k < sch.step_count(); ++k) {
    out.clear();
    sch.sends(m, k, out);
    for (const CollectiveStep::Send& s : out) sent += s.bytes;
  }
  return sent_bytes_[key] = sent;
}

double AlphaBetaCosts::send_end_s(double ready_s, double bytes, int from, int to) {
  const PathCost pc = from == to ? PathCost{0, std::numeric_limits<double>::infinity()} : path_cost(from, to);
  return ready_s + net_.message_overhead_s() + net_.eager_copy_s(bytes) + (net_.rendezvous(bytes) ? 3 : 1) * pc.latency_s +
         bytes / pc.bandwidth_Bps;
}

// A collective's time without per-message overheads. The multi-ring's step sends two flows at
// once: L-1 channels' chunks to the next member of the block, one across to the next block; the
// slower sets the step. Every other algorithm: its alpha-beta time over the slowest ring pair.
double AlphaBetaCosts::collective_time_s(const CollectiveSchedule& sch, const CollectiveWork& c, const GroupTable& gt,
                                         int group, int member) {
  const auto& members = gt.members.at(group);
  const int n = static_cast<int>(members.size()), L = gt.block_size;
  if (c.algorithm == CollectiveAlgorithm::tree) return tree_time_s(sch, c, members, member);
  if (stepwise(c)) {
    const std::vector<PathCost>& pc = slowest_step_pairs(sch, gt, group, c);
    double t = 0;
    CollectiveStep st;
    for (int k = 0; k < sch.step_count(); ++k) {
      sch.critical_step(0, k, st);
      t += pc[k].latency_s + st.sends.at(0).bytes / pc[k].bandwidth_Bps;
    }
    return t;
  }
  if (c.algorithm != CollectiveAlgorithm::multi_ring || L < 2 || L >= n) {
    const PathCost pc = slowest_ring_pair(gt, group, c);
    return sch.alpha_beta_time_s(pc.latency_s, pc.bandwidth_Bps);
  }
  const PathCost inside = collective_path_cost(members[0], members[1], c),
                 across = collective_path_cost(members[L - 1], members[L], c);
  const double channel_chunk = wire_bytes(c) / n / L;
  return sch.step_count() * std::max(inside.latency_s + (L - 1) * channel_chunk / inside.bandwidth_Bps,
                                     across.latency_s + channel_chunk / across.bandwidth_Bps);
}

const std::vector<AlphaBetaCosts::PathCost>& AlphaBetaCosts::slowest_step_pairs(const CollectiveSchedule& sch,
                                                                                const GroupTable& gt, int group,
                                                                                const CollectiveWork& c) {
  const auto key = std::make_tuple(&gt, group, c.kind, c.algorithm, c.within_node_step_latency_s,
                                   c.between_nodes_step_latency_s);
  auto it = step_costs_.find(key);
  if (it != step_costs_.end()) return it->second;
  const auto& members = gt.members.at(group);
  std::vector<PathCost> worst(sch.step_count(), PathCost{0, std::numeric_limits<double>::infinity()});
  CollectiveStep st;
  for (int k = 0; k < sch.step_count(); ++k)
    for (size_t m = 0; m < members.size(); ++m) {
      sch.critical_step(static_cast<int>(m), k, st);
      for (const auto& snd : st.sends) {
        const PathCost pc = collective_path_cost(members[m], members[snd.peer], c);
        worst[k].latency_s = std::max(worst[k].latency_s, pc.latency_s);
        worst[k].bandwidth_Bps = std::min(worst[k].bandwidth_Bps, pc.bandwidth_Bps);
      }
    }
  return step_costs_[key] = std::move(worst);
}

// NCCL's tree: its steps in lockstep (CollectiveSchedule::tree_lockstep_end_s), each flow its path's
// latency and bandwidth; the member's own end.
double AlphaBetaCosts::tree_time_s(const CollectiveSchedule& sch, const CollectiveWork& c, const std::vector<int>& members,
                                   int m) {
  const auto key = std::make_tuple(members.data(), wire_bytes(c), c.tree_chunks, c.tree_members_per_node,
                                   c.within_node_step_latency_s, c.between_nodes_step_latency_s);
  auto it = tree_ends_.find(key);
  if (it == tree_ends_.end())
    it = tree_ends_.emplace(key, sch.tree_lockstep_end_s([&](int from, int to, double bytes) {
                        const PathCost pc = collective_path_cost(members[from], members[to], c);
                        return pc.latency_s + bytes / pc.bandwidth_Bps;
                      })).first;
  return it->second[m];
}

// Member m's cost of MPI's protocols over the whole collective: the eager copy of each message it
// sends (Network::eager_copy_s) and, per step that sends by rendezvous, one round trip of
// `latency_s` (the step's messages are posted together, so their handshakes overlap).
double AlphaBetaCosts::protocol_s(const CollectiveSchedule& sch, int m, double latency_s) const {
  if (net_.eager_copy_s(1.0) == 0 && !net_.rendezvous(1e300)) return 0;  // neither protocol modelled
  double total_s = 0;
  CollectiveStep st;
  for (int k = 0; k < sch.step_count(); ++k) {
    sch.critical_step(m, k, st);
    bool rendezvous = false;
    for (const auto& snd : st.sends) {
      total_s += net_.eager_copy_s(snd.bytes);
      rendezvous = rendezvous || net_.rendezvous(snd.bytes);
    }
    if (rendezvous) total_s += 2 * latency_s;
  }
  return total_s;
}

// The largest latency and the smallest bandwidth over the group's consecutive members (with the
// step latencies of collective c's library).
AlphaBetaCosts::PathCost AlphaBetaCosts::slowest_ring_pair(const GroupTable& gt, int group, const CollectiveWork& c) {
  auto key = std::make_tuple(&gt, group, c.within_node_step_latency_s, c.between_nodes_step_latency_s);
  auto it = ring_costs_.find(key);
  if (it != ring_costs_.end()) return it->second;
  const auto& members = gt.members.at(group);
  const size_t n = members.size();
  PathCost worst{0, std::numeric_limits<double>::infinity()};
  for (size_t m = 0; m < n; ++m) {
    const PathCost pc = collective_path_cost(members[m], members[(m + 1) % n], c);
    worst.latency_s = std::max(worst.latency_s, pc.latency_s);
    worst.bandwidth_Bps = std::min(worst.bandwidth_Bps, pc.bandwidth_Bps);
  }
  return ring_costs_[key] = worst;
}

// path_cost with collective c's library latency in place of the network's own.
AlphaBetaCosts::PathCost AlphaBetaCosts::collective_path_cost(int a, int b, const CollectiveWork& c) {
  PathCost pc = path_cost(a, b);
  const int na = w_.node_of_rank[a], nb = w_.node_of_rank[b];
  if (na != nb) pc.latency_s += net_.message_latency_s(na, nb, c) - net_.message_latency_s(na, nb);
  return pc;
}

AlphaBetaCosts::PathCost AlphaBetaCosts::path_cost(int a, int b) {
  const int na = w_.node_of_rank[a], nb = w_.node_of_rank[b];
  if (na == nb) return PathCost{0, std::numeric_limits<double>::infinity()};
  auto key = std::make_pair(na, nb);
  auto it = paths_.find(key);
  if (it != paths_.end()) return it->second;
  std::vector<LinkRef> links;
  net_.path(na, nb, links);
  PathCost pc{0, std::numeric_limits<double>::infinity()};
  for (const LinkRef& l : links) {
    const LinkKind& k = net_.link_kinds().at(l.kind);
    pc.latency_s += k.latency_s;
    pc.bandwidth_Bps = std::min(pc.bandwidth_Bps, k.bandwidth_Bps * net_.bandwidth_factor(l.kind, l.instance));
  }
  pc.latency_s += net_.message_latency_s(na, nb);  // the library's per-message latency (0 for most networks)
  return paths_[key] = pc;
}

namespace {

class Estimator {
 public:
  Estimator(const Workload& w, const Network& net, const CostModel& cost)
      : w_(w), net_(net), cost_(cost), costs_(w, net), memory_kind_(net.memory_path_kind()) {}

  SimResult run() {
    const size_t P = w_.programs.size();
    rep_.assign(P, -1);
    std::vector<int> count(P, 0);
    for (int r = 0; r < w_.rank_count; ++r) {
      const int p = w_.program_index(r);
      if (rep_[p] < 0) rep_[p] = r;
      count[p]++;
    }
    timing_.resize(P);
    memory_.resize(P);
    for (size_t p = 0; p < P; ++p) timing_[p].assign(boost::num_vertices(w_.programs[p]), OpTiming{-1, -1});
    // Programs wait on each other only through receives: advance each as far as it can, and
    // go round until all are done.
    std::vector<size_t> next(P, 0);
    bool progress = true, done = false;
    while (progress && !done) {
      progress = false;
      done = true;
      for (size_t p = 0; p < P; ++p) {
        if (rep_[p] < 0) continue;
        const size_t n = timing_[p].size();
        while (next[p] < n && advance(static_cast<int>(p), next[p])) {
          ++next[p];
          progress = true;
        }
        if (next[p] < n) done = false;
      }
    }
    if (!done) {
      for (size_t p = 0; p < P; ++p)
        if (rep_[p] >= 0 && next[p] < timing_[p].size()) {
          const Op& op = w_.programs[p][next[p]];
          throw std::runtime_error("analytic estimate: op '" + op.name + "' of rank " + std::to_string(rep_[p]) +
                                   " waits for a send that never happens");
        }
    }
    SimResult res;
    for (size_t p = 0; p < P; ++p) {
      if (rep_[p] < 0) continue;
      SimulatedRank sr;
      sr.rank = rep_[p];
      sr.multiplicity = count[p];
      sr.ops = timing_[p];
      for (const OpTiming& t : sr.ops) res.step_time_s = std::max(res.step_time_s, t.end_s);
      res.ranks.push_back(std::move(sr));
    }
    res.stats.simulated_ranks = static_cast<long>(res.ranks.size());
    return res;
  }

 private:
  // Times op v of program p if its dependencies are timed; false otherwise.
  bool advance(int p, size_t v) {
    const StepGraph& g = w_.programs[p];
    double ready = 0;
    auto in = boost::in_edges(v, g);
    for (auto e = in.first; e != in.second; ++e) {
      const double end = timing_[p][boost::source(*e, g)].end_s;
      if (end < 0) return false;
      ready = std::max(ready, end);
    }
    const int r = rep_[p];
    const Op& op = g[v];
    double end = ready;
    if (const auto* c = std::get_if<ComputeWork>(&op.work)) {
      end = ready + cost_.compute_time_s(*c);
      if (memory_kind_ >= 0) end = memory_shared_end_s(p, r, ready, end, memory_path_bytes(*c, end - ready, path_Bps(r)));
    } else if (const auto* c = std::get_if<CollectiveWork>(&op.work)) {
      end = costs_.collective_end_s(ready, *c, r);
      if (memory_kind_ >= 0)
        end = memory_shared_end_s(p, r, ready, end,
                                  std::min(2 * costs_.member_sent_bytes(*c, r), (end - ready) * path_Bps(r)));
    } else {
      const auto& t = std::get<TransferWork>(op.work);
      const GroupTable& gt = costs_.table(t.group_role);
      const auto& members = gt.members.at(gt.group_of_rank.at(r));
      const int n = static_cast<int>(members.size()), m = gt.index_in_group[r];
      if (t.direction == TransferWork::Direction::send) {
        const int peer = members[((m + t.offset) % n + n) % n];
        end = costs_.send_end_s(ready, t.bytes, r, peer);
        sent_[{p, t.tag}] = end;
      } else {
        const int sender = members[((m - t.offset) % n + n) % n];
        auto it = sent_.find({w_.program_index(sender), t.tag});
        if (it == sent_.end()) return false;
        end = std::max(ready, it->second);
      }
    }
    timing_[p][v] = OpTiming{ready, end};
    return true;
  }

  // The bandwidth of rank r's memory path (its node's link of memory_kind_).
  double path_Bps(int r) const {
    return net_.link_kinds().at(memory_kind_).bandwidth_Bps * net_.bandwidth_factor(memory_kind_, w_.node_of_rank[r]);
  }

  // When an op of program p on [ready_s, end_s] alone, moving `bytes` through rank r's memory path,
  // ends beside the ops of p timed on the path before it: it runs at its own rate alone while they
  // leave it that much, else at what they leave, until its bytes are through. end_s exactly when
  // nothing slows it.
  double memory_shared_end_s(int p, int r, double ready_s, double end_s, double bytes) {
    const double alone_s = end_s - ready_s;
    if (!(bytes > 0) || !(alone_s > 0)) return end_s;
    const double own_Bps = bytes / alone_s, path = path_Bps(r);
    double used_Bps = 0;
    std::vector<std::pair<double, double>> changes;  // (time, change of the others' rate)
    for (const MemoryUse& u : memory_[p]) {
      if (u.end_s <= ready_s) continue;
      if (u.start_s <= ready_s) used_Bps += u.rate_Bps;
      else changes.emplace_back(u.start_s, u.rate_Bps);
      changes.emplace_back(u.end_s, -u.rate_Bps);
    }
    std::sort(changes.begin(), changes.end());
    double t = ready_s, left = bytes;
    bool slowed = false;
    for (size_t i = 0;; ++i) {
      const double free_Bps = std::max(0.0, path - used_Bps);
      const double rate = std::min(own_Bps, free_Bps);
      if (rate < own_Bps * (1 - 1e-12)) slowed = true;  // not by rounding of the others' rates
      const double next = i < changes.size() ? changes[i].first : std::numeric_limits<double>::infinity();
      if (rate > 0 && t + left / rate <= next) {
        t += left / rate;
        break;
      }
      if (i == changes.size()) break;  // cannot happen: the others' rate is 0 after their last end
      left -= rate * (next - t);
      t = next;
      used_Bps += changes[i].second;
    }
    const double end = slowed ? std::max(t, end_s) : end_s;
    memory_[p].push_back(MemoryUse{ready_s, end, bytes / (end - ready_s)});
    return end;
  }

  struct MemoryUse {
    double start_s, end_s, rate_Bps;
  };
  const Workload& w_;
  const Network& net_;
  const CostModel& cost_;
  AlphaBetaCosts costs_;
  const int memory_kind_;  // Network::memory_path_kind, -1: none
  std::vector<int> rep_;
  std::vector<std::vector<OpTiming>> timing_;
  std::vector<std::vector<MemoryUse>> memory_;  // per program: the ops timed on its memory path
  std::map<std::pair<int, long>, double> sent_;  // (program, tag) -> arrival
};

}  // namespace

SimResult estimate_step(const Workload& w, const Network& net, const CostModel& cost) {
  return Estimator(w, net, cost).run();
}

}  // namespace exasim
