// The analytic mode: a closed-form estimate of a step on the same step graphs the engine
// replays, for pruning a sweep before the simulated runs. One representative rank per
// program (the first rank that runs it); each op starts when its dependencies are done and
// lasts:
//  * a compute op: its cost-model time;
//  * a collective: its algorithm's textbook alpha-beta time (CollectiveSchedule), with alpha the
//    latency and beta the narrowest link of the path from the representative to its next
//    group member;
//  * a send: the path's latency plus bytes over its narrowest link; a receive: until the
//    matching send (same tag, from the member at -offset, whose program is replayed too) is done.
// No two flows contend for a link and shared links are not divided among the ranks that use
// them: the estimate is a lower bound of the simulated step on congested networks. One link is
// shared: where the network names a node's memory path (Network::memory_path_kind, the Sunway's NoC),
// the representative's compute ops (memory_path_bytes) and collectives (twice the bytes it sends:
// out and in, at most its time at the path's bandwidth) take its bandwidth in the order they are
// timed; an op that overlaps ones timed before it gets what they leave (at most its own rate alone)
// and ends when its bytes are through. Two ops that start together thus end, the later of them, when
// both ops' bytes are through the path, as under the replay's max-min sharing
// (Replay::start_memory_stream); alone an op lasts its cost. Point-to-point sends (pipeline stages)
// do not take the path here: the formula tier (models/plan_formula.hpp), which must equal this
// estimate on the plans it covers, has no memory path, and on those plans no collective overlaps a
// compute op of its rank (the gradient reduction follows the stage's backward, the update follows it).
#pragma once
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/collectives.hpp"
#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/network.hpp"
#include "sim/workload.hpp"

namespace exasim {

// The costs the estimate charges, for one workload's placement and groups on a network: a
// collective's alpha-beta time for a member rank (its algorithm's steps over the slowest ring pair
// of its group, the per-message overheads and MPI's protocol costs) and a send's time. Used by
// estimate_step for every op, and by the plan's closed-form cost (models/plan_formula.hpp) without
// a graph. Path and ring costs are remembered per object.
class AlphaBetaCosts {
 public:
  AlphaBetaCosts(const Workload& w, const Network& net) : w_(w), net_(net) {}
  // When collective `c` started at `ready_s` ends for rank `rank` of its group (at once for a
  // group of one or no bytes); collective_s: its seconds.
  double collective_end_s(double ready_s, const CollectiveWork& c, int rank);
  double collective_s(const CollectiveWork& c, int rank) { return collective_end_s(0, c, rank); }
  // When a send of `bytes` from rank `from` to rank `to` started at `ready_s` arrives (no latency
  // to itself); send_s: its seconds.
  double send_end_s(double ready_s, double bytes, int from, int to);
  double send_s(double bytes, int from, int to) { return send_end_s(0, bytes, from, to); }
  const GroupTable& table(const std::string& role) const;
  // The bytes member `rank` of collective `c` sends over the whole collective, on the wire (its
  // schedule's sends, whose bytes carry the protocol's wire factor); 0 for a group of one.
  double member_sent_bytes(const CollectiveWork& c, int rank);

 private:
  struct PathCost {
    double latency_s = 0;
    double bandwidth_Bps = 0;
  };
  double protocol_s(const CollectiveSchedule& sch, int m, double latency_s) const;
  double collective_time_s(const CollectiveSchedule& sch, const CollectiveWork& c, const GroupTable& gt, int group,
                           int member);
  double tree_time_s(const CollectiveSchedule& sch, const CollectiveWork& c, const std::vector<int>& members, int m);
  PathCost slowest_ring_pair(const GroupTable& gt, int group, const CollectiveWork& c);
  // Per step, the slowest pair among the members' critical-path sends (pairwise, halving and
  // doubling: each step has partners of its own).
  const std::vector<PathCost>& slowest_step_pairs(const CollectiveSchedule& sch, const GroupTable& gt, int group,
                                                  const CollectiveWork& c);
  PathCost collective_path_cost(int a, int b, const CollectiveWork& c);
  PathCost path_cost(int a, int b);
  const Workload& w_;
  const Network& net_;
  std::map<std::pair<int, int>, PathCost> paths_;
  std::map<std::tuple<const GroupTable*, int, CollectiveKind, CollectiveAlgorithm, double, int>, double> sent_bytes_;
  std::map<std::tuple<const GroupTable*, int, double, double>, PathCost> ring_costs_;
  std::map<std::tuple<const GroupTable*, int, CollectiveKind, CollectiveAlgorithm, double, double>, std::vector<PathCost>>
      step_costs_;
  // tree: each member's end by (group's members, wire bytes, chunks, members per node, latencies)
  std::map<std::tuple<const int*, double, int, int, double, double>, std::vector<double>> tree_ends_;
};

// Returns a SimResult with one SimulatedRank per program (multiplicity: the ranks running
// it) and no SimGrid statistics. Throws std::runtime_error when a receive has no send.
SimResult estimate_step(const Workload& w, const Network& net, const CostModel& cost);

}  // namespace exasim
