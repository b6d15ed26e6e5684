// Replays a workload's step on SimGrid.
//
// The step is first expanded into our own task DAG (compute tasks, flows, joins); SimGrid
// activities are created only when a task becomes ready. Keeping dependencies out of
// SimGrid matters: with every activity started up front and chained by add_successor,
// SimGrid 3.32 spends time linear in the number of live comms at each completion.
//
// SimGrid 3.32 also keeps every activity started from maestro (all of ours) in one
// std::list, and removes each one on completion with list::remove, a walk over the whole
// list: every completion costs time linear in the number of live activities. Pure delays
// therefore do not become SimGrid activities: a flow's extra latency, and a compute task
// when a rank's compute tasks never overlap (then nothing shares its compute units and
// the task lasts exactly its cost), are kernel timers, which live in a heap. The comms
// remain; their list's nodes are kept in a compact arena (see node_arena.hpp) so that the
// walk runs from cache.
//
// Fidelity:
//  * exhaustive: every rank is simulated; every flow goes from its source node to its real
//    destination node over the real path; a collective step waits for its own previous sends
//    and for the flows it receives (sendrecv semantics).
//  * folded: one representative per rank class. A representative's flow is routed over the
//    real path mapped onto the folded platform: node-private links map to the
//    representative's own links (in a symmetric pattern a rank receives what it sends: the
//    "mirror"), shared links (e.g. a supernode uplink) map to the folded link of all domains
//    that hold the same classes alike, whose capacity is divided by the number of ranks each
//    representative stands for in such a domain (see check_fold_uniformity).
//    Consecutive steps over the same folded route merge into one flow carrying their bytes,
//    preceded by a delay carrying the latencies of the merged steps.
//
// Programs: each simulated rank replays its own rank's program (Workload::program); op ids
// are per program, so each slot's ops sit at their own offset in op_ready_ / op_done_. The
// ops of all slots are expanded op id by op id (op 0 of every slot, then op 1, ...).
// Collectives are matched across ranks the MPI way: a rank's n-th collective over a group
// role meets the n-th collective over that role of every other member of its group (in one
// program, the same op). Exhaustive fidelity expands a collective once all its members have
// reached it; folded fidelity expands each representative's side alone, as before.
//
// Point-to-point transfers: a send is one flow from the sender to its peer (exhaustive: the
// real endpoints and path; folded: from the representative over the mapped path to a sink,
// like a folded collective's flows); it is done when its bytes have arrived. A receive is
// done when its own predecessors are done and the matching send's flow has arrived; in
// folded fidelity the sender is the representative of the sending rank's class. Receives
// are wired to their sends after every task exists (the send may come at a later op id or in
// another slot). A zero-byte transfer, or one between two ranks on the same node (the
// Network describes no intra-node path), takes no time but still orders the ops.
#include "sim/engine.hpp"

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <variant>

#include "sim/collectives.hpp"
#include "sim/node_arena.hpp"

namespace sg4 = simgrid::s4u;

namespace exasim {

const char* to_string(Fidelity f) { return f == Fidelity::folded ? "folded" : "exhaustive"; }

namespace {

struct Task {
  enum Kind : uint8_t { compute, flow, join };
  Kind kind = join;
  int pending = 0;
  int parts = 0;       // SimGrid activities still running for this task
  int slot = -1;       // simulated rank slot (compute tasks)
  double amount = 0;   // compute: seconds; flow: bytes
  double delay_s = 0;  // flow: extra latency before the transfer
  int src = -1, dst = -1;  // flow endpoints
  double start_s = -1, end_s = -1;
  std::vector<int> succ;
};

struct ResolvedLink {
  std::string name;
  double bandwidth_Bps;
  double latency_s;
};

// What the engine needs of one program, prepared once however many slots run it.
struct ProgramInfo {
  const StepGraph* graph = nullptr;
  int index = 0;                      // in Workload::programs
  size_t n_ops = 0;
  std::vector<double> op_seconds;     // per op: the cost of a compute op, else 0
  std::vector<const GroupTable*> table;  // per op: the group table of a collective or transfer
  std::vector<int> collective_seq;    // per collective op: its index among the program's
                                      // collectives over the same role
  std::unordered_map<long, OpId> send_by_tag;
  bool compute_chain = false;         // see compute_ops_form_a_chain()
};

// One rank's side of an exhaustive collective.
struct Participant {
  int slot;
  OpId op;
  int ready, done;
};

// One collective among the members of one group (exhaustive fidelity).
struct CollectiveInstance {
  const CollectiveWork* work = nullptr;  // the first member's
  OpId first_op = 0;
  int first_slot = 0;
  const GroupTable* gt = nullptr;
  int group = 0;
  std::vector<int> by_member;  // member index -> participant, -1 until it arrives
  int arrived = 0;
};

// A receive waiting for its send (resolved once every task exists).
struct PendingRecv {
  int slot;
  OpId op;
  int done;
};

class Replay {
 public:
  Replay(const Workload& w, const Network& net, const CostModel& cost, Fidelity f)
      : w_(w), net_(net), cost_(cost), fid_(f), overhead_s_(net.message_overhead_s()) {}

  SimResult run();

 private:
  // --- construction of the task DAG
  void choose_ranks();
  void check_fold_uniformity();
  int new_task(Task::Kind k) {
    tasks_.emplace_back();
    tasks_.back().kind = k;
    return static_cast<int>(tasks_.size()) - 1;
  }
  void edge(int from, int to) {
    tasks_[from].succ.push_back(to);
    tasks_[to].pending++;
  }
  void prepare_program(int index);
  void build();
  void join_collective_exhaustive(int s, OpId v, const CollectiveWork& c, int ready);
  void expand_collectives_exhaustive();
  void expand_collective_folded(int s, OpId v, const CollectiveWork& c, int ready);
  void expand_send(int s, OpId v, const TransferWork& t, int ready);
  void resolve_recv(const PendingRecv& p);
  static bool compute_ops_form_a_chain(const StepGraph& g);
  int link_id(int kind, int instance, double bandwidth_Bps);
  std::vector<int> map_path(int slot, int src_node, int dst_node);
  // Folded: the id of map_path(slot, src_node, dst_node) among the distinct routes seen, cached
  // per (slot, dst_node): a direct all-to-all over a large group asks for every member's node at
  // every exchange, and its sends fold onto a handful of routes.
  int route_id(int slot, int src_node, int dst_node);
  int endpoint_for_node(int node);
  int flow_task(int src_ep, int dst_ep, double bytes, double delay_s);
  int folded_flow(int slot, const std::vector<int>& route, double bytes, double delay_s);
  double route_latency_s(const std::vector<int>& links) const;
  const GroupTable& table(const std::string& role) const;
  const ProgramInfo& prog(int slot) const { return programs_[slot_prog_[slot]]; }
  // The member of r's group for the role at (r's index + offset) mod the group's size.
  int peer_of(const GroupTable& gt, int rank, long offset, const Op& op) const;
  std::string describe_op(int slot, OpId v) const;

  // --- SimGrid side
  void build_platform();
  void launch(int t);
  void start_delay(int t, double seconds);
  void part_done(int t);
  void complete(int t);
  void drain();
  void drain_soon();

  const Workload& w_;
  const Network& net_;
  const CostModel& cost_;
  Fidelity fid_;
  double overhead_s_;  // the network's per-message sender overhead

  std::vector<int> slot_rank_, rank_slot_, multiplicity_;
  std::unordered_map<int, int> slot_of_class_;  // folded: class -> its representative's slot
  // folded: per shared link kind, each domain's folded link and the ranks a representative
  // stands for there (see check_fold_uniformity)
  struct FoldedDomain {
    int instance = 0;
    int per = 1;
  };
  std::vector<std::map<int, FoldedDomain>> fold_domain_;
  std::vector<Task> tasks_;
  std::vector<ProgramInfo> programs_;  // only the programs some slot runs are prepared
  std::vector<int> slot_prog_;         // slot -> index in programs_ (= Workload program index)
  std::vector<size_t> slot_base_;      // slot -> offset of its op 0 in op_ready_ / op_done_
  std::vector<int> op_ready_, op_done_;  // [slot_base_[slot] + op]
  std::vector<char> slot_compute_as_delay_;  // per slot: its program's compute ops form a chain

  // exhaustive collectives: instances by (group table, group, sequence number)
  std::map<std::tuple<const GroupTable*, int, int>, int> instance_of_;
  std::vector<CollectiveInstance> instances_;
  std::vector<Participant> participants_;
  std::vector<int> complete_instances_;  // complete, not yet expanded
  std::vector<PendingRecv> recvs_;

  std::vector<ResolvedLink> links_;
  std::unordered_map<uint64_t, int> link_index_;
  std::vector<std::string> endpoints_;
  std::unordered_map<int, int> node_endpoint_;
  std::map<std::vector<int>, int> sink_by_route_;
  std::unordered_map<uint64_t, int> route_id_of_dst_;   // (slot, dst node) -> route id
  std::map<std::vector<int>, int> route_index_;          // route -> id
  std::vector<std::vector<int>> interned_routes_;        // id -> route
  std::map<std::pair<int, int>, std::vector<int>> routes_;
  std::vector<int> slot_endpoint_;

  std::vector<std::vector<sg4::Host*>> cg_hosts_;  // per slot
  std::vector<sg4::Host*> ep_hosts_;
  double unit_speed_ = 1;
  std::unordered_map<const sg4::Activity*, sg4::ActivityPtr> live_;
  std::vector<sg4::ActivityPtr> finished_;
  std::vector<int> ready_queue_;
  bool drain_pending_ = false;
  SimStats stats_;
};

const GroupTable& Replay::table(const std::string& role) const {
  auto it = w_.groups.find(role);
  if (it == w_.groups.end()) throw std::runtime_error("workload has no group role '" + role + "'");
  return it->second;
}

void Replay::choose_ranks() {
  rank_slot_.assign(w_.rank_count, -1);
  if (fid_ == Fidelity::exhaustive) {
    for (int r = 0; r < w_.rank_count; ++r) {
      rank_slot_[r] = static_cast<int>(slot_rank_.size());
      slot_rank_.push_back(r);
      multiplicity_.push_back(1);
    }
    return;
  }
  std::map<int, int> rep_of_class;  // class -> slot
  for (int r = 0; r < w_.rank_count; ++r) {
    const int c = w_.class_of_rank.at(r);
    auto it = rep_of_class.find(c);
    if (it == rep_of_class.end()) {
      rep_of_class[c] = static_cast<int>(slot_rank_.size());
      rank_slot_[r] = static_cast<int>(slot_rank_.size());
      slot_rank_.push_back(r);
      multiplicity_.push_back(1);
    } else {
      const int rep = slot_rank_[it->second];
      if (w_.program_index(r) != w_.program_index(rep))
        throw std::runtime_error("folded fidelity: ranks " + std::to_string(rep) + " and " + std::to_string(r) +
                                 " of class " + std::to_string(c) + " run different programs (" +
                                 std::to_string(w_.program_index(rep)) + " and " +
                                 std::to_string(w_.program_index(r)) +
                                 "); a class must not mix programs (give them different classes, or use "
                                 "--fidelity exhaustive)");
      multiplicity_[it->second]++;
    }
  }
  slot_of_class_.insert(rep_of_class.begin(), rep_of_class.end());
  check_fold_uniformity();
}

// Folding maps each shared link onto a folded link standing for every domain that holds the
// same classes with the same largest count n: the reps of those classes share it at 1/n of the
// link's capacity, as the n ranks of a class share the real one. When every domain holds every
// class alike (a MoDa layout on supernodes) there is one folded link per kind, and the folding
// is exact for symmetric patterns; on a rail-optimized fat tree whose leaves each hold one
// pipeline stage there is one per stage. A domain holding its classes unequally (a pipeline
// stage that ends inside a leaf group) is folded with its largest count: exact for the class
// it holds most of, pessimistic for the others.
void Replay::check_fold_uniformity() {
  const auto& kinds = net_.link_kinds();
  fold_domain_.assign(kinds.size(), {});
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (kinds[k].node_private) continue;
    std::map<int, std::map<int, int>> hist;  // domain -> class -> count
    for (int r = 0; r < w_.rank_count; ++r)
      hist[net_.domain_of(static_cast<int>(k), w_.node_of_rank[r])][w_.class_of_rank[r]]++;
    std::map<std::pair<std::vector<int>, int>, int> instance_of;  // (classes, largest count) -> folded link
    for (auto& [dom, byclass] : hist) {
      int per = 0;
      std::vector<int> classes;
      for (auto& [cls, n] : byclass) {
        per = std::max(per, n);
        classes.push_back(cls);
      }
      auto key = std::make_pair(std::move(classes), per);
      auto it = instance_of.find(key);
      if (it == instance_of.end()) it = instance_of.emplace(key, static_cast<int>(instance_of.size())).first;
      fold_domain_[k][dom] = FoldedDomain{it->second, per};
    }
  }
}

int Replay::link_id(int kind, int instance, double bandwidth_Bps) {
  const uint64_t key = (uint64_t(uint32_t(kind)) << 32) | uint32_t(instance);
  auto it = link_index_.find(key);
  if (it != link_index_.end()) return it->second;
  const auto& lk = net_.link_kinds().at(kind);
  links_.push_back({lk.name + "#" + std::to_string(instance), bandwidth_Bps, lk.latency_s});
  const int id = static_cast<int>(links_.size()) - 1;
  link_index_[key] = id;
  return id;
}

std::vector<int> Replay::map_path(int slot, int src_node, int dst_node) {
  thread_local std::vector<LinkRef> p;
  p.clear();
  net_.path(src_node, dst_node, p);
  std::vector<int> out;
  out.reserve(p.size());
  const auto& kinds = net_.link_kinds();
  for (const LinkRef& l : p) {
    const LinkKind& k = kinds.at(l.kind);
    if (fid_ == Fidelity::exhaustive)
      out.push_back(link_id(l.kind, l.instance, k.bandwidth_Bps));
    else if (k.node_private)
      out.push_back(link_id(l.kind, slot, k.bandwidth_Bps));  // the representative's own link
    else {
      auto it = fold_domain_.at(l.kind).find(l.instance);
      if (it == fold_domain_[l.kind].end())
        throw std::runtime_error("folded fidelity: a flow crosses " + k.name + " of domain " +
                                 std::to_string(l.instance) + ", which holds no rank");
      out.push_back(link_id(l.kind, it->second.instance, k.bandwidth_Bps / it->second.per));
    }
  }
  return out;
}

int Replay::route_id(int slot, int src_node, int dst_node) {
  const uint64_t key = (uint64_t(uint32_t(slot)) << 32) | uint32_t(dst_node);
  auto it = route_id_of_dst_.find(key);
  if (it != route_id_of_dst_.end()) return it->second;
  std::vector<int> route = map_path(slot, src_node, dst_node);
  auto [ri, inserted] = route_index_.emplace(route, static_cast<int>(interned_routes_.size()));
  if (inserted) interned_routes_.push_back(std::move(route));
  return route_id_of_dst_[key] = ri->second;
}

int Replay::endpoint_for_node(int node) {
  auto it = node_endpoint_.find(node);
  if (it != node_endpoint_.end()) return it->second;
  endpoints_.push_back(net_.node_name(node) + ".nic");
  const int id = static_cast<int>(endpoints_.size()) - 1;
  node_endpoint_[node] = id;
  return id;
}

double Replay::route_latency_s(const std::vector<int>& links) const {
  double s = 0;
  for (int l : links) s += links_[l].latency_s;
  return s;
}

int Replay::flow_task(int src_ep, int dst_ep, double bytes, double delay_s) {
  const int t = new_task(Task::flow);
  tasks_[t].src = src_ep;
  tasks_[t].dst = dst_ep;
  tasks_[t].amount = bytes;
  tasks_[t].delay_s = delay_s;
  return t;
}

// A flow from a representative over a mapped route, to the sink of that route (folded).
int Replay::folded_flow(int slot, const std::vector<int>& route, double bytes, double delay_s) {
  auto it = sink_by_route_.find(route);
  int sink;
  if (it == sink_by_route_.end()) {
    endpoints_.push_back("rep" + std::to_string(slot) + ".sink" + std::to_string(sink_by_route_.size()));
    sink = static_cast<int>(endpoints_.size()) - 1;
    sink_by_route_[route] = sink;
  } else {
    sink = it->second;
  }
  routes_.emplace(std::make_pair(slot_endpoint_[slot], sink), route);  // kept if already there
  return flow_task(slot_endpoint_[slot], sink, bytes, delay_s);
}

// True when every two compute ops of the program are ordered by the graph, so that a rank
// never runs two compute tasks at once: each task then has its compute units to itself
// and can be simulated as a delay of its cost. Ids are topological, so this holds when each
// compute op is reachable from the compute op just before it in id order, i.e. when that
// one is the latest compute op among its ancestors. One pass: latest[x] is the largest
// compute op that is x or reaches x.
bool Replay::compute_ops_form_a_chain(const StepGraph& g) {
  const size_t n = boost::num_vertices(g);
  std::vector<long> latest(n, -1);
  long previous = -1;  // the last compute op seen in id order
  for (OpId v = 0; v < n; ++v) {
    long above = -1;
    auto in = boost::in_edges(v, g);
    for (auto e = in.first; e != in.second; ++e) above = std::max(above, latest[boost::source(*e, g)]);
    if (g[v].is_compute()) {
      if (previous >= 0 && above != previous) return false;
      previous = static_cast<long>(v);
      latest[v] = static_cast<long>(v);
    } else {
      latest[v] = above;
    }
  }
  return true;
}

void Replay::prepare_program(int index) {
  ProgramInfo& p = programs_[index];
  if (p.graph) return;
  const StepGraph& g = w_.programs.at(index);
  p.graph = &g;
  p.index = index;
  p.n_ops = boost::num_vertices(g);
  p.op_seconds.assign(p.n_ops, 0);
  p.table.assign(p.n_ops, nullptr);
  p.collective_seq.assign(p.n_ops, -1);
  p.compute_chain = compute_ops_form_a_chain(g);
  std::map<const GroupTable*, int> collectives_by_role;
  for (OpId v = 0; v < p.n_ops; ++v) {
    const Op& op = g[v];
    if (const auto* c = std::get_if<ComputeWork>(&op.work)) {
      p.op_seconds[v] = cost_.compute_time_s(*c);
    } else if (const auto* c = std::get_if<CollectiveWork>(&op.work)) {
      p.table[v] = &table(c->group_role);
      p.collective_seq[v] = collectives_by_role[p.table[v]]++;
    } else {
      const auto& t = std::get<TransferWork>(op.work);
      p.table[v] = &table(t.group_role);
      if (t.direction == TransferWork::Direction::send) {
        auto [it, fresh] = p.send_by_tag.emplace(t.tag, v);
        if (!fresh)
          throw std::runtime_error("program " + std::to_string(index) + ": ops '" + g[it->second].name + "' and '" +
                                   op.name + "' both send tag " + std::to_string(t.tag) +
                                   " (a tag names one message of a rank's step)");
      }
    }
  }
}

std::string Replay::describe_op(int slot, OpId v) const {
  return "op '" + (*prog(slot).graph)[v].name + "' (program " + std::to_string(slot_prog_[slot]) + ") on rank " +
         std::to_string(slot_rank_[slot]);
}

int Replay::peer_of(const GroupTable& gt, int rank, long offset, const Op& op) const {
  const int g = gt.group_of_rank.at(rank);
  if (g < 0) throw std::runtime_error("op '" + op.name + "': rank " + std::to_string(rank) + " has no group for role '" +
                                      std::get<TransferWork>(op.work).group_role + "'");
  const auto& members = gt.members[g];
  const long n = static_cast<long>(members.size());
  const long i = ((gt.index_in_group[rank] + offset) % n + n) % n;
  return members[i];
}

void Replay::build() {
  const size_t slots = slot_rank_.size();
  programs_.assign(w_.programs.size(), ProgramInfo{});
  slot_prog_.resize(slots);
  slot_base_.resize(slots + 1);
  slot_compute_as_delay_.resize(slots);
  size_t max_ops = 0;
  slot_base_[0] = 0;
  for (size_t s = 0; s < slots; ++s) {
    slot_prog_[s] = w_.program_index(slot_rank_[s]);
    prepare_program(slot_prog_[s]);
    const ProgramInfo& p = programs_[slot_prog_[s]];
    slot_compute_as_delay_[s] = p.compute_chain;
    slot_base_[s + 1] = slot_base_[s] + p.n_ops;
    max_ops = std::max(max_ops, p.n_ops);
  }
  op_ready_.assign(slot_base_[slots], -1);
  op_done_.assign(slot_base_[slots], -1);
  if (fid_ == Fidelity::folded) {
    slot_endpoint_.resize(slots);
    for (size_t s = 0; s < slots; ++s) {
      endpoints_.push_back("rep" + std::to_string(s) + ".nic");
      slot_endpoint_[s] = static_cast<int>(endpoints_.size()) - 1;
    }
  }
  // vecS vertices are numbered in insertion order, and add_op only links to earlier ops,
  // so increasing ids are a topological order of each program. Op v of every slot, then v+1.
  std::vector<int> ready(slots);
  for (OpId v = 0; v < max_ops; ++v) {
    for (size_t s = 0; s < slots; ++s) {
      const ProgramInfo& p = prog(static_cast<int>(s));
      if (v >= p.n_ops) continue;
      const int j = new_task(Task::join);
      auto in = boost::in_edges(v, *p.graph);
      for (auto e = in.first; e != in.second; ++e) edge(op_done_[slot_base_[s] + boost::source(*e, *p.graph)], j);
      ready[s] = j;
      op_ready_[slot_base_[s] + v] = j;
    }
    for (size_t s = 0; s < slots; ++s) {
      const ProgramInfo& p = prog(static_cast<int>(s));
      if (v >= p.n_ops) continue;
      const Op& op = (*p.graph)[v];
      if (op.is_compute()) {
        const int t = new_task(Task::compute);
        tasks_[t].slot = static_cast<int>(s);
        tasks_[t].amount = p.op_seconds[v];
        edge(ready[s], t);
        op_done_[slot_base_[s] + v] = t;
      } else if (const auto* c = std::get_if<CollectiveWork>(&op.work)) {
        if (fid_ == Fidelity::exhaustive)
          join_collective_exhaustive(static_cast<int>(s), v, *c, ready[s]);
        else
          expand_collective_folded(static_cast<int>(s), v, *c, ready[s]);
      } else {
        const auto& t = std::get<TransferWork>(op.work);
        if (t.direction == TransferWork::Direction::send) {
          expand_send(static_cast<int>(s), v, t, ready[s]);
        } else {
          const int done = new_task(Task::join);
          edge(ready[s], done);
          op_done_[slot_base_[s] + v] = done;
          recvs_.push_back({static_cast<int>(s), v, done});
        }
      }
    }
    if (!complete_instances_.empty()) expand_collectives_exhaustive();
  }
  for (const CollectiveInstance& in : instances_) {
    if (in.arrived == static_cast<int>(in.by_member.size())) continue;
    const auto& members = in.gt->members[in.group];
    std::string missing;
    for (size_t m = 0; m < members.size(); ++m)
      if (in.by_member[m] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(members[m]);
    throw std::runtime_error(describe_op(in.first_slot, in.first_op) + ": collective over role '" +
                             in.work->group_role + "' has no matching collective on rank(s) " + missing +
                             " (the n-th collective over a role must exist on every member of the group)");
  }
  for (const PendingRecv& p : recvs_) resolve_recv(p);
}

// Exhaustive: rank s reaches its side of a collective; the collective is expanded once every
// member of its group has reached it (at the end of the op id where the last one does).
void Replay::join_collective_exhaustive(int s, OpId v, const CollectiveWork& c, int ready) {
  const ProgramInfo& p = prog(s);
  const GroupTable& gt = *p.table[v];
  const int r = slot_rank_[s];
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
  CollectiveStep st;
  for (size_t i = 0; i < sides.size(); ++i) {
    const CollectiveInstance& in = instances_[sides[i].instance];
    const CollectiveWork& c = *in.work;
    const auto& members = in.gt->members[in.group];
    schedules.emplace_back(c.kind, c.algorithm, static_cast<int>(members.size()), c.bytes, in.gt->block_size);
    const CollectiveSchedule& sch = schedules.back();
    const int r = slot_rank_[participants_[sides[i].participant].slot];
    const int m = in.gt->index_in_group[r];
    sends[i].resize(sch.step_count());
    for (int k = 0; k < sch.step_count(); ++k) {
      sch.step(m, k, st);
      const double posted_s = overhead_s_ * static_cast<double>(st.sends.size());  // the sender posts them one by one
      for (const auto& snd : st.sends) {
        if (snd.bytes <= 0) continue;
        const int dst_rank = members[snd.peer];
        const int src_ep = endpoint_for_node(w_.node_of_rank[r]);
        const int dst_ep = endpoint_for_node(w_.node_of_rank[dst_rank]);
        auto key = std::make_pair(src_ep, dst_ep);
        if (!routes_.count(key))
          routes_[key] = map_path(participants_[sides[i].participant].slot, w_.node_of_rank[r], w_.node_of_rank[dst_rank]);
        sends[i][k].push_back({snd.peer, flow_task(src_ep, dst_ep, snd.bytes, posted_s)});
      }
    }
  }
  // The step-k flows that side i receives.
  auto received = [&](size_t i, int k, std::vector<int>& out) {
    const CollectiveInstance& in = instances_[sides[i].instance];
    const int r = slot_rank_[participants_[sides[i].participant].slot];
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

void Replay::expand_collective_folded(int s, OpId v, const CollectiveWork& c, int ready) {
  const GroupTable& gt = *prog(s).table[v];
  CollectiveStep st;
  const int r = slot_rank_[s];
  const int g = gt.group_of_rank.at(r);
  if (g < 0) throw std::runtime_error("rank " + std::to_string(r) + " has no group for role '" + c.group_role + "'");
  const auto& members = gt.members[g];
  const CollectiveSchedule sch(c.kind, c.algorithm, static_cast<int>(members.size()), c.bytes, gt.block_size);
  const int m = gt.index_in_group[r];
  const int src_node = w_.node_of_rank[r];
  int prev = ready;
  // the current run of consecutive single-flow steps over one route
  std::vector<int> run_route;
  double run_bytes = 0;
  int run_steps = 0;
  double run_messages = 0;  // messages the run's steps post (each costs the sender overhead_s_)
  auto flush = [&]() {
    if (run_steps == 0) return;
    const double delay = (run_steps - 1) * route_latency_s(run_route) + run_messages * overhead_s_;
    const int t = folded_flow(s, run_route, run_bytes, delay);
    edge(prev, t);
    prev = t;
    run_steps = 0;
    run_bytes = 0;
    run_messages = 0;
  };
  for (int k = 0; k < sch.step_count(); ++k) {
    sch.step(m, k, st);
    if (st.sends.size() == 1) {
      const auto& snd = st.sends[0];
      if (snd.bytes <= 0) continue;
      const std::vector<int>& route = interned_routes_[route_id(s, src_node, w_.node_of_rank[members[snd.peer]])];
      if (run_steps > 0 && route != run_route) flush();
      run_route = route;
      run_bytes += snd.bytes;
      run_steps++;
      run_messages += 1;
      continue;
    }
    flush();
    // a step with many concurrent sends: one flow per distinct route, all after `prev`
    std::map<std::vector<int>, double> by_route;
    std::map<int, double> by_route_id;
    for (const auto& snd : st.sends)
      if (snd.bytes > 0) by_route_id[route_id(s, src_node, w_.node_of_rank[members[snd.peer]])] += snd.bytes;
    for (auto& [id, bytes] : by_route_id) by_route[interned_routes_[id]] += bytes;  // in route order, as before
    if (by_route.empty()) continue;
    const int join = new_task(Task::join);
    for (auto& [route, bytes] : by_route) {
      run_route = route;
      run_bytes = bytes;
      run_steps = 1;
      run_messages = static_cast<double>(st.sends.size());  // every flow starts once all are posted
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

// A send: one flow to the peer, done when its bytes have arrived.
void Replay::expand_send(int s, OpId v, const TransferWork& t, int ready) {
  const Op& op = (*prog(s).graph)[v];
  const int r = slot_rank_[s];
  const int peer = peer_of(*prog(s).table[v], r, t.offset, op);
  if (peer == r)
    throw std::runtime_error(describe_op(s, v) + " sends tag " + std::to_string(t.tag) + " to itself (offset " +
                             std::to_string(t.offset) + " in a group of " +
                             std::to_string(prog(s).table[v]->members[prog(s).table[v]->group_of_rank[r]].size()) +
                             " for role '" + t.group_role + "')");
  const int src_node = w_.node_of_rank[r], dst_node = w_.node_of_rank[peer];
  int task;
  if (t.bytes <= 0 || src_node == dst_node) {
    task = new_task(Task::join);
  } else if (fid_ == Fidelity::exhaustive) {
    const int src_ep = endpoint_for_node(src_node);
    const int dst_ep = endpoint_for_node(dst_node);
    const auto key = std::make_pair(src_ep, dst_ep);
    if (!routes_.count(key)) routes_[key] = map_path(s, src_node, dst_node);
    task = flow_task(src_ep, dst_ep, t.bytes, overhead_s_);
  } else {
    task = folded_flow(s, map_path(s, src_node, dst_node), t.bytes, overhead_s_);
  }
  edge(ready, task);
  op_done_[slot_base_[s] + v] = task;
}

// A receive also waits for the flow of the matching send: the one with its tag, on the member
// at (own index - offset); folded, on that rank's class representative.
void Replay::resolve_recv(const PendingRecv& p) {
  const ProgramInfo& info = prog(p.slot);
  const Op& op = (*info.graph)[p.op];
  const auto& t = std::get<TransferWork>(op.work);
  const int r = slot_rank_[p.slot];
  const int sender = peer_of(*info.table[p.op], r, -static_cast<long>(t.offset), op);
  const int sender_slot = fid_ == Fidelity::exhaustive ? rank_slot_[sender] : slot_of_class_.at(w_.class_of_rank[sender]);
  const ProgramInfo& sp = prog(sender_slot);
  auto it = sp.send_by_tag.find(t.tag);
  if (it == sp.send_by_tag.end())
    throw std::runtime_error(describe_op(p.slot, p.op) + " receives tag " + std::to_string(t.tag) + " from rank " +
                             std::to_string(sender) + " (offset " + std::to_string(t.offset) + " over role '" +
                             t.group_role + "'), but rank " + std::to_string(sender) + "'s program " +
                             std::to_string(sp.index) + " has no send with that tag");
  // The send with that tag, made by the real sender, must reach this rank.
  const Op& send_op = (*sp.graph)[it->second];
  const auto& st = std::get<TransferWork>(send_op.work);
  const int dest = peer_of(*sp.table[it->second], sender, st.offset, send_op);
  if (dest != r)
    throw std::runtime_error(describe_op(p.slot, p.op) + " receives tag " + std::to_string(t.tag) + " from rank " +
                             std::to_string(sender) + ", but that rank's op '" + send_op.name + "' sends it to rank " +
                             std::to_string(dest) + " (offset " + std::to_string(st.offset) + " over role '" +
                             st.group_role + "')");
  edge(op_done_[slot_base_[sender_slot] + it->second], p.done);
}

void Replay::build_platform() {
  // The root zone holds the compute hosts, which never communicate; the network zone holds
  // the flow endpoints and an explicit route for each pair that the step uses.
  auto* compute = sg4::create_empty_zone("exasim");
  auto* root = sg4::create_full_zone("network");
  root->set_parent(compute);
  unit_speed_ = net_.compute_unit_speed_flops_per_s();
  const int units = net_.compute_units_per_node();
  cg_hosts_.resize(slot_rank_.size());
  for (size_t s = 0; s < slot_rank_.size(); ++s) {
    const std::string base = net_.node_name(w_.node_of_rank[slot_rank_[s]]);
    for (int u = 0; u < units; ++u)
      cg_hosts_[s].push_back(compute->create_host(base + ".cg" + std::to_string(u), unit_speed_));
  }
  for (auto& name : endpoints_) ep_hosts_.push_back(root->create_host(name, 1.0));
  std::vector<sg4::Link*> sglinks;
  for (auto& l : links_) sglinks.push_back(root->create_link(l.name, l.bandwidth_Bps)->set_latency(l.latency_s)->seal());
  for (auto& [pair, route] : routes_) {
    std::vector<sg4::LinkInRoute> lr;
    for (int l : route) lr.emplace_back(sglinks[l]);
    root->add_route(ep_hosts_[pair.first]->get_netpoint(), ep_hosts_[pair.second]->get_netpoint(), nullptr, nullptr,
                    lr, false);
  }
  root->seal();
  compute->seal();
  stats_.links = static_cast<long>(links_.size());
  stats_.hosts = static_cast<long>(ep_hosts_.size() + slot_rank_.size() * units);
  stats_.routes = static_cast<long>(routes_.size());
}

void Replay::launch(int t) {
  Task& task = tasks_[t];
  task.start_s = sg4::Engine::get_clock();
  auto tag = reinterpret_cast<void*>(static_cast<intptr_t>(t) + 1);
  if (task.kind == Task::join || (task.kind == Task::compute && task.amount <= 0) ||
      (task.kind == Task::flow && task.amount <= 0 && task.delay_s <= 0)) {
    complete(t);
    return;
  }
  if (task.kind == Task::compute && slot_compute_as_delay_[task.slot]) {
    task.parts = 1;
    start_delay(t, task.amount);
    stats_.compute_activities++;
    return;
  }
  if (task.kind == Task::compute) {
    for (sg4::Host* h : cg_hosts_[task.slot]) {
      sg4::ExecPtr x = sg4::Exec::init();
      x->set_flops_amount(task.amount * unit_speed_)->set_host(h);
      x->set_data(tag);
      x->start();
      live_[x.get()] = x;
      task.parts++;
      stats_.compute_activities++;
    }
    return;
  }
  // flow: an optional delay, then the transfer
  if (task.delay_s > 0 && task.parts == 0) {
    task.parts = -1;  // marks the delay stage
    start_delay(t, task.delay_s);
    stats_.delay_activities++;
    return;
  }
  task.parts = 1;
  sg4::CommPtr c = sg4::Comm::sendto_init(ep_hosts_[task.src], ep_hosts_[task.dst]);
  c->set_payload_size(static_cast<uint64_t>(std::llround(task.amount)));
  c->set_data(tag);
  c->start();
  live_[c.get()] = c;
  stats_.flows++;
}

void Replay::start_delay(int t, double seconds) {
  simgrid::kernel::timer::Timer::set(sg4::Engine::get_clock() + seconds, [this, t]() { part_done(t); });
}

// One SimGrid activity (or delay) of task t is over.
void Replay::part_done(int t) {
  Task& task = tasks_[t];
  if (task.kind == Task::flow && task.parts == -1) {  // delay stage over: start the transfer
    task.delay_s = 0;
    task.parts = 0;
    const double start = task.start_s;
    launch(t);
    task.start_s = start;
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
  Task& task = tasks_[t];
  task.end_s = sg4::Engine::get_clock();
  for (int s : task.succ)
    if (--tasks_[s].pending == 0) ready_queue_.push_back(s);
}

void Replay::drain() {
  while (!ready_queue_.empty()) {
    const int t = ready_queue_.back();
    ready_queue_.pop_back();
    launch(t);
  }
}

SimResult Replay::run() {
  choose_ranks();
  build();

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
  build_platform();

  sg4::Activity::on_completion_cb([this](sg4::Activity const& a) {
    const auto t = static_cast<int>(reinterpret_cast<intptr_t>(a.get_data<void>()) - 1);
    if (t < 0) return;
    // SimGrid may still touch the activity after this callback: release it once time advances.
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

  SimResult res;
  res.fidelity = fid_;
  long unfinished = 0;
  for (auto& t : tasks_) {
    if (t.end_s < 0) unfinished++;
    res.step_time_s = std::max(res.step_time_s, t.end_s);
  }
  if (unfinished > 0)
    throw std::runtime_error("the step graph did not complete: " + std::to_string(unfinished) +
                             " tasks never ran (a dependency cycle or a missing peer)");
  for (size_t s = 0; s < slot_rank_.size(); ++s) {
    SimulatedRank sr;
    sr.rank = slot_rank_[s];
    sr.multiplicity = multiplicity_[s];
    sr.program = slot_prog_[s];
    const size_t base = slot_base_[s], n = slot_base_[s + 1] - base;
    sr.ops.resize(n);
    for (size_t v = 0; v < n; ++v) {
      sr.ops[v].ready_s = tasks_[op_ready_[base + v]].end_s;
      sr.ops[v].end_s = tasks_[op_done_[base + v]].end_s;
    }
    res.ranks.push_back(std::move(sr));
  }
  stats_.simulated_ranks = static_cast<long>(slot_rank_.size());
  res.stats = stats_;
  return res;
}

}  // namespace

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
  Replay r(w, net, cost, opt.fidelity);
  return r.run();
}

}  // namespace exasim
