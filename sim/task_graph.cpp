// The task DAG of one step: each simulated rank's ops become tasks (a join per op with several
// predecessors or none, done once they are; an op with one predecessor is ready when that one's
// task is done; a compute task, the flows of a transfer or collective), op id by op id
// over every slot (op 0 of every slot, then op 1, ...; op ids are per program, so each slot's
// ops sit at their own offset in op_ready_ / op_done_).
//
// Point-to-point transfers: a send is one flow from the sender to its peer (exhaustive: the
// real endpoints and path; folded: from the representative over the mapped path to a sink,
// like a folded collective's flows); it is done when its bytes have arrived. A receive is
// done when its own predecessors are done and the matching send's flow has arrived; in
// folded fidelity the sender is the representative of the sending rank's class. Receives
// are wired to their sends after every task exists (the send may come at a later op id or in
// another slot). A zero-byte transfer, or one between two ranks on the same node (the
// Network describes no intra-node path), takes no time but still orders the ops.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <variant>

#include "sim/replay.hpp"

namespace exasim::detail {

const GroupTable& Replay::table(const std::string& role) const {
  auto it = w_.groups.find(role);
  if (it == w_.groups.end()) throw std::runtime_error("workload has no group role '" + role + "'");
  return it->second;
}

int Replay::flow_task(int src_ep, int dst_ep, double bytes, double delay_s) {
  const int t = new_task(Task::flow);
  tasks_[t].ref = static_cast<int>(flows_.size());
  flows_.emplace_back() = {bytes, delay_s, src_ep, dst_ep};
  return t;
}

// A flow from a representative over a mapped route, to the sink of that route (folded).
int Replay::folded_flow(int slot, const std::vector<int>& route, double bytes, double delay_s) {
  const auto [src_ep, dst_ep] = paths_.folded_endpoints(slot, route);
  return flow_task(src_ep, dst_ep, bytes, delay_s + paths_.hidden_latency_s(route));
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

// In a compute chain, a compute op v whose one predecessor is the compute op u, u's one
// successor, starts when u ends and nothing else waits for u: the two run as one task (one
// timer of their summed seconds), v's end computed from u's as the engine would have (see
// compute_end_s). Runs of such ops merge whole, so a layer's kernels between two collectives
// are one task, not a join and a compute task each.
void Replay::merge_compute_runs(ProgramInfo& p) {
  const StepGraph& g = *p.graph;
  p.merged_next.assign(p.n_ops, -1);
  p.merged.assign(p.n_ops, 0);
  // With a memory path each op streams its own bytes beside its own execution: no merged runs.
  // Beside communication kernels each op of a run still starts at its own share of the SMs
  // (sm_share.cpp follows the run op by op).
  if (!p.compute_chain || !p.op_memory_bytes.empty()) return;
  for (OpId v = 0; v < p.n_ops; ++v) {
    if (!g[v].is_compute() || boost::in_degree(v, g) != 1) continue;
    const OpId u = boost::source(*boost::in_edges(v, g).first, g);
    if (!g[u].is_compute() || boost::out_degree(u, g) != 1) continue;
    p.merged_next[u] = static_cast<int>(v);
    p.merged[v] = 1;
  }
}

// The bytes a compute op moves through its node's memory path, beside its execution
// (memory_path_bytes, sim/step_graph.hpp).
double Replay::memory_stream_bytes(const ComputeWork& c, double seconds) const {
  return memory_path_bytes(c, seconds, net_.link_kinds().at(net_.memory_path_kind()).bandwidth_Bps);
}

// Every field of ComputeWork: a field added to it must be added here too (else two works that
// differ only in it would share one cost).
static_assert(sizeof(ComputeWork) == 80, "ComputeKey must list every field of ComputeWork");
static std::int64_t bits_of(double x) {
  std::int64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

ComputeKey::ComputeKey(const ComputeWork& c)
    : words{static_cast<std::int64_t>(c.kernel), static_cast<std::int64_t>(c.precision), bits_of(c.flops),
            bits_of(c.bytes), c.shape.dims[0], c.shape.dims[1], c.shape.dims[2], c.shape.batch,
            c.communication_sms, bits_of(c.random_words), c.standalone ? 1 : 0} {}

size_t ComputeKeyHash::operator()(const ComputeKey& k) const {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
  for (std::int64_t x : k.words) {
    h ^= static_cast<std::uint64_t>(x);
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h);
}

// c's index in works_, its cost (cost_.compute_time_s) asked once per distinct work (the cost model
// is a function of the work).
int Replay::distinct_work(const ComputeWork& c) {
  auto [it, fresh] = work_index_.try_emplace(ComputeKey(c), static_cast<int>(works_.size()));
  if (fresh) {
    works_.emplace_back().work = &c;
    works_.back().seconds = cost_.compute_time_s(c);
  }
  return it->second;
}

void Replay::prepare_program(int index) {
  ProgramInfo& p = programs_[index];
  if (p.graph) return;
  const StepGraph& g = w_.programs.at(index);
  p.graph = &g;
  p.index = index;
  p.n_ops = boost::num_vertices(g);
  p.op_seconds.assign(p.n_ops, 0);
  if (net_.memory_path_kind() >= 0) p.op_memory_bytes.assign(p.n_ops, 0);
  p.table.assign(p.n_ops, nullptr);
  p.collective_seq.assign(p.n_ops, -1);
  p.single_pred.assign(p.n_ops, -1);  // (read by build for every slot: no walk of the graph's vertices)
  p.compute.assign(p.n_ops, 0);
  p.work.assign(p.n_ops, -1);
  for (OpId v = 0; v < p.n_ops; ++v)
    if (boost::in_degree(v, g) == 1) p.single_pred[v] = static_cast<int>(boost::source(*boost::in_edges(v, g).first, g));
  p.compute_chain = compute_ops_form_a_chain(g);
  std::map<const GroupTable*, int> collectives_by_role;
  for (OpId v = 0; v < p.n_ops; ++v) {
    const Op& op = g[v];
    if (const auto* c = std::get_if<ComputeWork>(&op.work)) {
      p.work[v] = distinct_work(*c);
      p.op_seconds[v] = works_[p.work[v]].seconds;
      if (!p.op_memory_bytes.empty()) p.op_memory_bytes[v] = memory_stream_bytes(*c, p.op_seconds[v]);
      p.compute[v] = 1;
    } else if (const auto* c = std::get_if<CollectiveWork>(&op.work)) {
      p.table[v] = &table(c->group_role);
      p.collective_seq[v] = collectives_by_role[p.table[v]]++;
      p.collective_by_seq[{p.table[v], p.collective_seq[v]}] = v;
      if (c->kernel_sms > 0) p.sm_ops.emplace_back(static_cast<int>(v), c->kernel_sms);
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
  p.kernels_hold_sms = !p.sm_ops.empty();
  merge_compute_runs(p);
}

std::string Replay::describe_op(int slot, OpId v) const {
  return "op '" + (*prog(slot).graph)[v].name + "' (program " + std::to_string(slot_prog_[slot]) + ") on rank " +
         std::to_string(fold_.slot_rank[slot]);
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

void Replay::prepare_slots() {
  const size_t slots = fold_.slot_rank.size();
  programs_.assign(w_.programs.size(), ProgramInfo{});
  slot_prog_.resize(slots);
  slot_base_.resize(slots + 1);
  slot_compute_as_delay_.resize(slots);
  if (net_.memory_path_kind() >= 0) slot_memory_eps_.assign(slots, {-1, -1});
  slot_base_[0] = 0;
  for (size_t s = 0; s < slots; ++s) {
    slot_prog_[s] = w_.program_index(fold_.slot_rank[s]);
    prepare_program(slot_prog_[s]);
    const ProgramInfo& p = programs_[slot_prog_[s]];
    slot_compute_as_delay_[s] = p.compute_chain;
    slot_base_[s + 1] = slot_base_[s] + p.n_ops;
  }
  op_ready_.assign(slot_base_[slots], -1);
  op_done_.assign(slot_base_[slots], -1);
  slot_slowed_.assign(slots, 0);
  if (fid_ == Fidelity::folded)
    for (size_t s = 0; s < slots; ++s) {
      slot_slowed_[s] = node_slowed(w_.node_of_rank[fold_.slot_rank[s]]);
      any_slot_slowed_ = any_slot_slowed_ || slot_slowed_[s];
    }
}

// Op v of slot s, whose ready join is `ready`: its done task.
void Replay::expand_op(int s, OpId v, int ready) {
  const ProgramInfo& p = prog(s);
  if (p.merged[v]) {  // its run's task (ready is that task too: see build)
    op_done_[slot_base_[s] + v] = ready;
    return;
  }
  if (p.compute[v]) {  // (from the program's info: the op itself is not read)
    const int t = new_task(Task::compute);
    tasks_[t].ref = s;
    tasks_[t].op = static_cast<int>(v);
    if (!p.op_memory_bytes.empty() && p.op_memory_bytes[v] > 0 && slot_memory_eps_[s].first < 0)
      slot_memory_eps_[s] = paths_.memory_endpoints(s, w_.node_of_rank[fold_.slot_rank[s]]);
    edge(ready, t);
    op_done_[slot_base_[s] + v] = t;
    return;
  }
  const Op& op = (*p.graph)[v];
  if (const auto* c = std::get_if<CollectiveWork>(&op.work)) {
    if (fid_ == Fidelity::exhaustive)
      join_collective_exhaustive(s, v, *c, ready);
    else
      expand_collective_folded(s, v, *c, ready);
  } else {
    const auto& t = std::get<TransferWork>(op.work);
    if (t.direction == TransferWork::Direction::send) {
      expand_send(s, v, t, ready);
    } else {
      const int done = new_task(Task::join);
      edge(ready, done);
      op_done_[slot_base_[s] + v] = done;
      recvs_.push_back({s, v, done});
    }
  }
}

void Replay::build() {
  prepare_slots();
  const size_t slots = fold_.slot_rank.size();
  size_t max_ops = 0;
  for (size_t s = 0; s < slots; ++s) max_ops = std::max(max_ops, prog(static_cast<int>(s)).n_ops);
  // vecS vertices are numbered in insertion order, and add_op only links to earlier ops,
  // so increasing ids are a topological order of each program. Op v of every slot, then v+1.
  std::vector<int> ready(slots);
  for (OpId v = 0; v < max_ops; ++v) {
    for (size_t s = 0; s < slots; ++s) {
      const ProgramInfo& p = prog(static_cast<int>(s));
      if (v >= p.n_ops) continue;
      if (p.single_pred[v] >= 0) {  // ready when its one predecessor is done: no join
        ready[s] = op_ready_[slot_base_[s] + v] = op_done_[slot_base_[s] + p.single_pred[v]];
        continue;
      }
      const int j = new_task(Task::join);
      auto in = boost::in_edges(v, *p.graph);
      for (auto e = in.first; e != in.second; ++e) edge(op_done_[slot_base_[s] + boost::source(*e, *p.graph)], j);
      ready[s] = j;
      op_ready_[slot_base_[s] + v] = j;
    }
    for (size_t s = 0; s < slots; ++s)
      if (v < prog(static_cast<int>(s)).n_ops) expand_op(static_cast<int>(s), v, ready[s]);
    if (!complete_instances_.empty()) expand_collectives_exhaustive();
  }
  check_collectives_matched();
  for (const PendingRecv& p : recvs_) resolve_recv(p);
  for (const PendingSync& p : syncs_) resolve_sync(p);
  finish_edges();
}

// Successors in one array by source (a stable counting sort keeps each task's creation order).
// succ_begin_[t + 1] starts as the end of t's range and, filled from the last edge back, ends as
// its start; shifting it down one place gives the starts. No separate cursor array (4 bytes a
// task), and the edges' chunks are freed as the fill passes them while succ_'s pages (not
// initialised) are first touched as it fills them, mostly from the end too (an edge's source is
// seldom far behind it), so the edges and their successor array are not both whole at once.
void Replay::finish_edges() {
  const size_t n = tasks_.size(), m = edges_.size();
  succ_begin_.assign(n + 1, 0);
  for (size_t i = 0; i < m; ++i) succ_begin_[edges_[i].first + 1]++;
  for (size_t t = 0; t < n; ++t) succ_begin_[t + 1] += succ_begin_[t];
  succ_.reset(new int[m]);
  for (size_t i = m; i-- > 0;) {
    succ_[--succ_begin_[edges_[i].first + 1]] = edges_[i].second;
    if (i % decltype(edges_)::kChunk == 0) edges_.pop_back_chunk();
  }
  for (size_t t = 0; t < n; ++t) succ_begin_[t] = succ_begin_[t + 1];
  succ_begin_[n] = static_cast<int>(m);
  edges_ = ChunkedVector<std::pair<int, int>>();
}

void Replay::check_collectives_matched() const {
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
}

// A send: one flow to the peer, done when its bytes have arrived.
void Replay::expand_send(int s, OpId v, const TransferWork& t, int ready) {
  const Op& op = (*prog(s).graph)[v];
  const int r = fold_.slot_rank[s];
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
    const auto eps = paths_.exhaustive_endpoints(s, src_node, dst_node);
    task = flow_task(eps.first, eps.second, t.bytes,
                     posting_s(t.bytes) + handshake_s(t.bytes, paths_.routes().at(eps)) +
                         net_.message_latency_s(src_node, dst_node));
  } else {
    const std::vector<int> route = paths_.map_path(s, src_node, dst_node);
    task = folded_flow(s, route, t.bytes,
                       posting_s(t.bytes) + handshake_s(t.bytes, route) + net_.message_latency_s(src_node, dst_node));
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
  const int r = fold_.slot_rank[p.slot];
  const int sender = peer_of(*info.table[p.op], r, -static_cast<long>(t.offset), op);
  const int sender_slot = fold_.slot_standing_for(w_, sender);
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

}  // namespace exasim::detail
