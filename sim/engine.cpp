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
//    "mirror"), shared links (e.g. a supernode uplink) map to one folded link whose capacity
//    is divided by the number of ranks each representative stands for in that link's domain.
//    Consecutive steps over the same folded route merge into one flow carrying their bytes,
//    preceded by a delay carrying the latencies of the merged steps.
#include "sim/engine.hpp"

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
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

class Replay {
 public:
  Replay(const Workload& w, const Network& net, const CostModel& cost, Fidelity f)
      : w_(w), net_(net), cost_(cost), fid_(f) {}

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
  void build();
  void expand_collective_exhaustive(OpId v, const CollectiveWork& c, const std::vector<int>& ready);
  void expand_collective_folded(OpId v, const CollectiveWork& c, const std::vector<int>& ready);
  bool compute_ops_form_a_chain() const;
  int link_id(int kind, int instance, double bandwidth_Bps);
  std::vector<int> map_path(int slot, int src_node, int dst_node);
  int endpoint_for_node(int node);
  int flow_task(int src_ep, int dst_ep, double bytes, double delay_s);
  double route_latency_s(const std::vector<int>& links) const;
  const GroupTable& table(const std::string& role) const;
  // Every rank runs programs[0] until multi-program replay lands.
  const StepGraph& graph_() const { return w_.programs.at(0); }

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

  std::vector<int> slot_rank_, rank_slot_, multiplicity_;
  int fold_per_domain_ = 1;  // ranks a representative stands for in each shared domain
  std::vector<Task> tasks_;
  size_t n_ops_ = 0;
  std::vector<int> op_ready_, op_done_;  // [slot * n_ops + op]
  std::vector<double> op_seconds_;       // cost of each compute op (same on every rank)
  bool compute_as_delay_ = false;        // see compute_ops_form_a_chain()

  std::vector<ResolvedLink> links_;
  std::unordered_map<uint64_t, int> link_index_;
  std::vector<std::string> endpoints_;
  std::unordered_map<int, int> node_endpoint_;
  std::map<std::vector<int>, int> sink_by_route_;
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
      multiplicity_[it->second]++;
    }
  }
  check_fold_uniformity();
}

// Folding divides a shared link's capacity by the number of ranks each representative stands
// for in that link's domain; that is exact only if every domain holds the same number of
// ranks of every class.
void Replay::check_fold_uniformity() {
  const auto& kinds = net_.link_kinds();
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (kinds[k].node_private) continue;
    std::map<int, std::map<int, int>> hist;  // domain -> class -> count
    for (int r = 0; r < w_.rank_count; ++r)
      hist[net_.domain_of(static_cast<int>(k), w_.node_of_rank[r])][w_.class_of_rank[r]]++;
    int per = -1;
    for (auto& [dom, byclass] : hist) {
      if (byclass.size() != slot_rank_.size())
        throw std::runtime_error("folded fidelity needs every " + kinds[k].name +
                                 " domain to hold ranks of every class; domain " + std::to_string(dom) +
                                 " holds " + std::to_string(byclass.size()) + " of " +
                                 std::to_string(slot_rank_.size()) +
                                 " classes (use --fidelity exhaustive for this plan)");
      for (auto& [cls, n] : byclass) {
        if (per == -1) per = n;
        if (n != per)
          throw std::runtime_error("folded fidelity needs every " + kinds[k].name +
                                   " domain to hold the same number of ranks of each class; domain " +
                                   std::to_string(dom) + " holds " + std::to_string(n) + " ranks of class " +
                                   std::to_string(cls) + ", expected " + std::to_string(per) +
                                   " (use --fidelity exhaustive for this plan)");
      }
    }
    if (per > 0) {
      if (fold_per_domain_ != 1 && fold_per_domain_ != per)
        throw std::runtime_error("folded fidelity: shared link kinds disagree on ranks per domain");
      fold_per_domain_ = per;
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
    else
      out.push_back(link_id(l.kind, 0, k.bandwidth_Bps / fold_per_domain_));
  }
  return out;
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

// True when every two compute ops of the step are ordered by the graph, so that a rank
// never runs two compute tasks at once: each task then has its compute units to itself
// and can be simulated as a delay of its cost.
bool Replay::compute_ops_form_a_chain() const {
  std::vector<OpId> compute;
  for (OpId v = 0; v < n_ops_; ++v)
    if (std::holds_alternative<ComputeWork>(graph_()[v].work)) compute.push_back(v);
  std::vector<char> seen(n_ops_);
  std::vector<OpId> stack;
  for (size_t i = 1; i < compute.size(); ++i) {  // ids are topological: b must be reachable from a
    const OpId a = compute[i - 1], b = compute[i];
    std::fill(seen.begin(), seen.end(), 0);
    stack.assign(1, a);
    bool reached = false;
    while (!stack.empty() && !reached) {
      const OpId u = stack.back();
      stack.pop_back();
      auto out = boost::out_edges(u, graph_());
      for (auto e = out.first; e != out.second; ++e) {
        const OpId x = boost::target(*e, graph_());
        if (x == b) reached = true;
        if (x < b && !seen[x]) {
          seen[x] = 1;
          stack.push_back(x);
        }
      }
    }
    if (!reached) return false;
  }
  return true;
}

void Replay::build() {
  n_ops_ = boost::num_vertices(graph_());
  compute_as_delay_ = compute_ops_form_a_chain();
  const size_t slots = slot_rank_.size();
  op_ready_.assign(slots * n_ops_, -1);
  op_done_.assign(slots * n_ops_, -1);
  op_seconds_.assign(n_ops_, 0);
  if (fid_ == Fidelity::folded) {
    slot_endpoint_.resize(slots);
    for (size_t s = 0; s < slots; ++s) {
      endpoints_.push_back("rep" + std::to_string(s) + ".nic");
      slot_endpoint_[s] = static_cast<int>(endpoints_.size()) - 1;
    }
  }
  // vecS vertices are numbered in insertion order, and add_op only links to earlier ops,
  // so increasing ids are a topological order.
  for (OpId v = 0; v < n_ops_; ++v) {
    const Op& op = graph_()[v];
    std::vector<int> ready(slots);
    for (size_t s = 0; s < slots; ++s) {
      const int j = new_task(Task::join);
      auto in = boost::in_edges(v, graph_());
      for (auto e = in.first; e != in.second; ++e) edge(op_done_[s * n_ops_ + boost::source(*e, graph_())], j);
      ready[s] = j;
      op_ready_[s * n_ops_ + v] = j;
    }
    if (const auto* c = std::get_if<ComputeWork>(&op.work)) {
      op_seconds_[v] = cost_.compute_time_s(*c);
      for (size_t s = 0; s < slots; ++s) {
        const int t = new_task(Task::compute);
        tasks_[t].slot = static_cast<int>(s);
        tasks_[t].amount = op_seconds_[v];
        edge(ready[s], t);
        op_done_[s * n_ops_ + v] = t;
      }
    } else if (std::holds_alternative<TransferWork>(op.work)) {
      throw std::runtime_error("op '" + op.name + "': point-to-point transfers are not replayed yet");
    } else {
      const auto& cw = std::get<CollectiveWork>(op.work);
      if (fid_ == Fidelity::exhaustive)
        expand_collective_exhaustive(v, cw, ready);
      else
        expand_collective_folded(v, cw, ready);
    }
  }
}

void Replay::expand_collective_exhaustive(OpId v, const CollectiveWork& c, const std::vector<int>& ready) {
  const GroupTable& gt = table(c.group_role);
  const size_t slots = slot_rank_.size();
  // sends[slot][k] = list of (destination member, flow task)
  std::vector<std::vector<std::vector<std::pair<int, int>>>> sends(slots);
  std::map<int, CollectiveSchedule> schedules;  // by group size
  auto schedule_for = [&](int n) -> const CollectiveSchedule& {
    auto it = schedules.find(n);
    if (it == schedules.end()) it = schedules.emplace(n, CollectiveSchedule(c.kind, c.algorithm, n, c.bytes, gt.block_size)).first;
    return it->second;
  };
  CollectiveStep st;
  for (size_t s = 0; s < slots; ++s) {
    const int r = slot_rank_[s];
    const int g = gt.group_of_rank.at(r);
    if (g < 0) throw std::runtime_error("rank " + std::to_string(r) + " has no group for role '" + c.group_role + "'");
    const auto& members = gt.members[g];
    const CollectiveSchedule& sch = schedule_for(static_cast<int>(members.size()));
    const int m = gt.index_in_group[r];
    sends[s].resize(sch.step_count());
    for (int k = 0; k < sch.step_count(); ++k) {
      sch.step(m, k, st);
      for (const auto& snd : st.sends) {
        if (snd.bytes <= 0) continue;
        const int dst_rank = members[snd.peer];
        const int src_ep = endpoint_for_node(w_.node_of_rank[r]);
        const int dst_ep = endpoint_for_node(w_.node_of_rank[dst_rank]);
        auto key = std::make_pair(src_ep, dst_ep);
        if (!routes_.count(key)) routes_[key] = map_path(static_cast<int>(s), w_.node_of_rank[r], w_.node_of_rank[dst_rank]);
        sends[s][k].push_back({snd.peer, flow_task(src_ep, dst_ep, snd.bytes, 0)});
      }
    }
  }
  // Wire dependencies: step k waits for own step k-1 sends and the step k-1 flows it receives.
  auto received = [&](int s, int k, std::vector<int>& out) {
    const int r = slot_rank_[s];
    const int g = gt.group_of_rank[r];
    const auto& members = gt.members[g];
    const CollectiveSchedule& sch = schedule_for(static_cast<int>(members.size()));
    const int m = gt.index_in_group[r];
    sch.step(m, k, st);
    for (int q : st.recv_from) {
      const int qs = rank_slot_[members[q]];
      for (auto& [peer, t] : sends[qs][k])
        if (peer == m) out.push_back(t);
    }
  };
  std::vector<int> rec;
  for (size_t s = 0; s < slots; ++s) {
    const int done = new_task(Task::join);
    op_done_[s * n_ops_ + v] = done;
    const int K = static_cast<int>(sends[s].size());
    if (K == 0) {
      edge(ready[s], done);
      continue;
    }
    for (int k = 0; k < K; ++k) {
      std::vector<int> deps;
      if (k == 0) {
        deps.push_back(ready[s]);
      } else {
        for (auto& p : sends[s][k - 1]) deps.push_back(p.second);
        rec.clear();
        received(static_cast<int>(s), k - 1, rec);
        deps.insert(deps.end(), rec.begin(), rec.end());
        if (sends[s][k - 1].empty() && rec.empty()) deps.push_back(ready[s]);
      }
      for (auto& p : sends[s][k])
        for (int d : deps) edge(d, p.second);
    }
    for (auto& p : sends[s][K - 1]) edge(p.second, done);
    rec.clear();
    received(static_cast<int>(s), K - 1, rec);
    for (int t : rec) edge(t, done);
    edge(ready[s], done);
  }
}

void Replay::expand_collective_folded(OpId v, const CollectiveWork& c, const std::vector<int>& ready) {
  const GroupTable& gt = table(c.group_role);
  CollectiveStep st;
  for (size_t s = 0; s < slot_rank_.size(); ++s) {
    const int r = slot_rank_[s];
    const int g = gt.group_of_rank.at(r);
    if (g < 0) throw std::runtime_error("rank " + std::to_string(r) + " has no group for role '" + c.group_role + "'");
    const auto& members = gt.members[g];
    const CollectiveSchedule sch(c.kind, c.algorithm, static_cast<int>(members.size()), c.bytes, gt.block_size);
    const int m = gt.index_in_group[r];
    const int src_node = w_.node_of_rank[r];
    int prev = ready[s];
    // the current run of consecutive single-flow steps over one route
    std::vector<int> run_route;
    double run_bytes = 0;
    int run_steps = 0;
    auto flush = [&]() {
      if (run_steps == 0) return;
      auto it = sink_by_route_.find(run_route);
      int sink;
      if (it == sink_by_route_.end()) {
        endpoints_.push_back("rep" + std::to_string(s) + ".sink" + std::to_string(sink_by_route_.size()));
        sink = static_cast<int>(endpoints_.size()) - 1;
        sink_by_route_[run_route] = sink;
        routes_[{slot_endpoint_[s], sink}] = run_route;
      } else {
        sink = it->second;
      }
      const double delay = (run_steps - 1) * route_latency_s(run_route);
      const int t = flow_task(slot_endpoint_[s], sink, run_bytes, delay);
      edge(prev, t);
      prev = t;
      run_steps = 0;
      run_bytes = 0;
    };
    for (int k = 0; k < sch.step_count(); ++k) {
      sch.step(m, k, st);
      if (st.sends.size() == 1) {
        const auto& snd = st.sends[0];
        if (snd.bytes <= 0) continue;
        std::vector<int> route = map_path(static_cast<int>(s), src_node, w_.node_of_rank[members[snd.peer]]);
        if (run_steps > 0 && route != run_route) flush();
        run_route = std::move(route);
        run_bytes += snd.bytes;
        run_steps++;
        continue;
      }
      flush();
      // a step with many concurrent sends: one flow per distinct route, all after `prev`
      std::map<std::vector<int>, double> by_route;
      for (const auto& snd : st.sends)
        if (snd.bytes > 0) by_route[map_path(static_cast<int>(s), src_node, w_.node_of_rank[members[snd.peer]])] += snd.bytes;
      if (by_route.empty()) continue;
      const int join = new_task(Task::join);
      for (auto& [route, bytes] : by_route) {
        run_route = route;
        run_bytes = bytes;
        run_steps = 1;
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
    op_done_[s * n_ops_ + v] = done;
  }
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
  if (task.kind == Task::compute && compute_as_delay_) {
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
    sr.ops.resize(n_ops_);
    for (size_t v = 0; v < n_ops_; ++v) {
      sr.ops[v].ready_s = tasks_[op_ready_[s * n_ops_ + v]].end_s;
      sr.ops[v].end_s = tasks_[op_done_[s * n_ops_ + v]].end_s;
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
  Replay r(w, net, cost, opt.fidelity);
  return r.run();
}

}  // namespace exasim
