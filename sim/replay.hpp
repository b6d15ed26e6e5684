// The engine's internals (not part of its interface; engine.hpp is): the replay of one step.
//
// The step is first expanded into our own task DAG (task_graph.cpp: compute tasks, flows,
// joins, with send/receive matching; collective_expansion.cpp: collectives into steps of
// flows); SimGrid activities are created only when a task becomes ready (simgrid_driver.cpp).
// Which ranks run is decided by folding.hpp, and how their flows are routed by path_mapping.hpp.
#pragma once
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <unordered_map>
#include <vector>

#include "sim/chunked_vector.hpp"
#include "sim/collectives.hpp"
#include "sim/cost_model.hpp"
#include "sim/detached_comms.hpp"
#include "sim/engine.hpp"
#include "sim/folding.hpp"
#include "sim/network.hpp"
#include "sim/path_mapping.hpp"
#include "sim/workload.hpp"

namespace exasim::detail {

// A task of the DAG: 24 bytes (an exhaustive step of a pipelined plan on 1,024 GPUs has over
// 10^8); its successors live in the Replay's shared storage (succ_). A compute task's cost is
// not stored: it is its op's (Replay::compute_s, computed at launch). A flow's bytes, latency and
// endpoints are a FlowInfo (Replay::flows_ at index ref; a live flow's own). A side task stands
// for one member's side of an exhaustive collective (ref: its LiveSide): it starts with the
// member's ready join and completes when the side's last step is over; the flows of its steps
// are tasks created during the run (LiveFlow), not part of the DAG.
struct Task {
  enum Kind : uint8_t { compute, flow, join, side };
  double end_s = -1;
  int pending = 0;
  int ref = -1;        // compute: simulated rank slot; flow: index in Replay::flows_; side: its LiveSide
  int op = -1;         // compute: its op in the slot's program
  int16_t parts = 0;   // SimGrid activities still running for this task (-1: a flow's delay stage)
  Kind kind = join;
  bool marked = false;  // communication kernels take or give back SMs when it is done (Replay::kernel_marks_)
};
static_assert(sizeof(Task) == 24, "Task is meant to stay 24 bytes");

// A flow task's transfer.
struct FlowInfo {
  double amount = 0;   // bytes
  double delay_s = 0;  // extra latency before the transfer
  int src = -1, dst = -1;  // endpoints
};

// What the engine needs of one program, prepared once however many slots run it.
struct ProgramInfo {
  const StepGraph* graph = nullptr;
  int index = 0;                      // in Workload::programs
  size_t n_ops = 0;
  std::vector<double> op_seconds;     // per op: the cost of a compute op, else 0
  // Per op, where the network has a memory path (Network::memory_path_kind; else empty): the bytes
  // a compute op moves through it (Replay::memory_stream_bytes).
  std::vector<double> op_memory_bytes;
  std::vector<const GroupTable*> table;  // per op: the group table of a collective or transfer
  std::vector<int> single_pred;       // per op: its one predecessor, or -1 (none or several)
  std::vector<char> compute;          // per op: a compute op
  std::vector<int> collective_seq;    // per collective op: its index among the program's
                                      // collectives over the same role
  std::unordered_map<long, OpId> send_by_tag;
  std::map<std::pair<const GroupTable*, int>, OpId> collective_by_seq;  // (table, collective_seq) -> op
  bool compute_chain = false;         // see compute_ops_form_a_chain()
  bool kernels_hold_sms = false;      // some collective's kernel holds SMs (sim/sm_share.cpp)
  std::vector<std::pair<int, int>> sm_ops;  // those collectives: (op, its kernel's SMs), in op order
  std::vector<int> work;               // per compute op: its distinct work (Replay::works_), else -1
  // A compute chain's runs (see merge_compute_runs()): merged_next[u] is the compute op whose
  // work continues op u's in the same task (-1: none), merged[v] that v continues its predecessor's.
  std::vector<int> merged_next;
  std::vector<char> merged;
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
  int schedule = -1;    // in Replay::schedules_, once complete
  int first_side = -1;  // its member m's side is sides_[first_side + m], once complete
};

// One member's side of an exhaustive collective during the run (live_collective.cpp). Step k+1
// is released once the side's step-k sends are done and the step-k flows it receives have
// arrived (every step of a collective with bytes sends at least one flow, and receives one flow
// from each member it lists in recv_from).
struct LiveSide {
  int instance = -1;
  int member = 0;
  int slot = 0;
  int task = -1;        // its side task
  int step = -1;        // the last released step (-1: not started)
  int left = 0;         // flows of `step` (sent or received) not yet over
  bool sent = false;    // a flow has been sent (the library's per-collective latency is paid)
  std::vector<int> early;  // early[j]: flows of step step+1+j received already
  // The hop to the last peer sent to (a ring sends every step to the same one): its endpoints,
  // its route's latency and the library's message latency on it, looked up once, not per step.
  int hop_peer = -1;
  int hop_src_ep = -1, hop_dst_ep = -1;
  double hop_route_latency_s = 0;
  double hop_message_latency_s = 0;
  int hop_signature = -1;  // the hop's route's Replay::exclusive_signature
};

// A flow of an exhaustive collective's step, created when the step is released and recycled
// when it arrives. Task ids of live flows are negative: -1 - index in Replay::live_flows_.
struct LiveFlow {
  Task task;
  FlowInfo info;
  int from_side = -1, to_side = -1;
  int step = 0;
  simgrid::s4u::CommPtr comm;  // its transfer while it runs (not in Replay::live_: no hash per flow)
  int signature = -1;     // its route's Replay::exclusive_signature
  int next_in_comm = 0;   // the next live flow its comm carries (0: none; live flow ids are < 0)
};

// A receive waiting for its send (resolved once every task exists).
struct PendingRecv {
  int slot;
  OpId op;
  int done;
};

// Folded: a representative's collective whose group holds slowed classes (their representative's
// node is slowed: Network::compute_factor or a bandwidth_factor of its links not 1) starts at
// `start`, once those classes' representatives have reached the same collective (resolved once
// every task exists).
// Folded: a run of consecutive single-flow steps of a representative's collective over one
// route, merged into one flow (collective_expansion.cpp). The merge assumes that the
// representatives sharing the run's folded links transfer in phase, which holds when every
// domain's links run at their kind's speed. A step over a degraded shared link
// (PathMap::crosses_degraded_shared_link) is a flow of its own: the classes beside that link run
// its steps out of phase (one class's first step stays inside its supernode, so it runs a step
// ahead of the other), and their transfers overlap the other's latency between steps; merged,
// every representative sent all of its bytes at once after all the latencies, sharing the
// degraded link with every other for the whole run (+10.9 % on the half-bandwidth uplink case of
// tests/unit/folding_test.cpp; with zero link latency the gap was -0.8 % merged).
struct FoldedRun {
  std::vector<int> route;
  double bytes = 0;
  int steps = 0;
  double posting_s = 0;     // the sender's cost of posting the run's steps' messages (posting_s each)
  int handshakes = 0;       // the run's steps that go by rendezvous: one round trip each
  double hop_latency_s = 0;  // ring: the slowest hop of the group's ring (each step waits for it)
  double message_latency_s = 0;  // the library's per-step latency on the run's route (Network::message_latency_s)
  double bandwidth_lag_s = 0;  // ring: what the group's slowest hop's steps take beyond this route's (RingHops)
  bool per_step = false;  // ring around failures: its hop shares a link with another hop (RingHops::shares)
};

// Folded: a ring's hops from each member to the member `offset` after it, as (latency, uncontended
// bandwidth) pairs, those no other hop is at least as slow on both dropped (a few at most), and the
// largest latency. A step of b bytes lasts max over the hops of (latency + b / bandwidth) in the
// exhaustive ring, whichever member's hop that is (each member waits for its neighbour's data).
struct RingHops {
  double worst_latency_s = 0;
  double narrowest_Bps = 0;
  bool degraded = false;  // some hop crosses a link at bandwidth_factor < 1
  std::vector<std::pair<double, double>> slowest;  // (latency_s, bandwidth_Bps)
  // Around failures (empty otherwise), per member: whether its hop crosses a link another of the
  // ring's hops crosses, and that hop's bandwidth at its share of those links when every hop on
  // them is a representative's (the folded run then simulates the share itself), else 0.
  std::vector<char> shares;
  std::vector<double> simulated_share_Bps;
  double step_s(double bytes) const {
    double t = 0;
    for (const auto& [l, b] : slowest) t = std::max(t, l + bytes / b);
    return t;
  }
};

// Folded ring with a slowed slot (Replay::ring_gate): steps from `early_steps` on wait for `sync`
// (every class has reached the ring) and `fill_s` after it; none when early_steps <= 0.
struct FoldedGate {
  int early_steps = 0;
  int sync = -1;
  double fill_s = 0;
};

// A slot's communication kernels and, where its compute ops form a chain, its running compute task
// (sim/sm_share.cpp): a run of ops (ProgramInfo::merged_next), of which `op` is running now.
struct SlotShare {
  int held_sms = 0;           // SMs the collectives' kernels running on the slot hold
  int task = -1;              // its running compute task (-1: none)
  int op = -1;                // the task's op running now
  double done_fraction = 0;   // of that op's work, as of since_s
  double since_s = 0;
  double duration_s = 0;      // the op's whole time at the current share
  simgrid::kernel::timer::Timer* timer = nullptr;  // the task's end (its run's last op's)
  // The running op's end at the current share.
  double op_end_s() const { return since_s + (1 - done_fraction) * duration_s; }
};

// A collective's kernel taking (sms > 0) or giving back (sms < 0) SMs on a slot when a task is done.
struct KernelMark {
  int task;
  int slot;
  int sms;
};

struct PendingSync {
  int start;
  const GroupTable* gt;
  int group;
  int seq;  // the collective's collective_seq
  int own_class;
  bool every_class = false;  // a ring's around failures: every other class of the group, slowed or not
};

// A compute op's work as a key: every field of ComputeWork, the doubles by their bits. Stages'
// programs repeat the same few hundred kernels at the same shapes over their ~16,000 compute ops,
// so prepare_program asks the cost model once per distinct work (Replay::distinct_work).
struct ComputeKey {
  std::array<std::int64_t, 11> words{};
  explicit ComputeKey(const ComputeWork& c);
  bool operator==(const ComputeKey& o) const { return words == o.words; }
};
struct ComputeKeyHash {
  size_t operator()(const ComputeKey& k) const;
};

// A distinct compute work of the programs: its cost, and its last costs beside communication
// kernels (sm_share.cpp) as (SMs held, seconds) pairs (0 SMs: none yet), replaced in turn; the same
// few shares recur op after op.
struct DistinctWork {
  const ComputeWork* work = nullptr;  // the first op's, in its program's graph
  double seconds = 0;
  std::array<std::pair<int, double>, 4> beside{};
  int next = 0;  // the pair replaced next
};

class Replay {
 public:
  Replay(const Workload& w, const Network& net, const CostModel& cost, Fidelity f, bool coalesce = false)
      : coalesce_(coalesce && f == Fidelity::exhaustive),
        w_(w),
        net_(net),
        cost_(cost),
        fid_(f),
        overhead_s_(net.message_overhead_s()),
        fold_(fold_ranks(w, net, f)),
        paths_(net, fold_, w) {}

  SimResult run();

 private:
  // --- the task DAG (task_graph.cpp)
  int new_task(Task::Kind k) {
    tasks_.emplace_back().kind = k;
    return static_cast<int>(tasks_.size()) - 1;
  }
  // Edges are collected while the DAG is built, then laid out by source (finish_edges).
  void edge(int from, int to) {
    edges_.emplace_back() = {from, to};
    tasks_[to].pending++;
  }
  void finish_edges();
  void prepare_program(int index);
  void prepare_slots();
  void build();
  void expand_op(int s, OpId v, int ready);
  void check_collectives_matched() const;
  void expand_send(int s, OpId v, const TransferWork& t, int ready);
  void resolve_recv(const PendingRecv& p);
  int distinct_work(const ComputeWork& c);
  std::unordered_map<ComputeKey, int, ComputeKeyHash> work_index_;  // index in works_ by work
  mutable std::vector<DistinctWork> works_;
  double work_beside_s(int work, int sms) const;
  static bool compute_ops_form_a_chain(const StepGraph& g);
  static void merge_compute_runs(ProgramInfo& p);
  double compute_end_s(const Task& task, double start_s) const;
  void fill_merged_times(size_t s, SimulatedRank& sr) const;
  int flow_task(int src_ep, int dst_ep, double bytes, double delay_s);
  int folded_flow(int slot, const std::vector<int>& route, double bytes, double delay_s);
  int folded_run_flow(int slot, const FoldedRun& run, int prev);
  const RingHops& ring_hops(const GroupTable& gt, int group, int offset, const CollectiveWork& c);
  double ring_bandwidth_lag_s(const RingHops& h, double bytes, int member, int src_node, int dst_node) const;
  const GroupTable& table(const std::string& role) const;
  const ProgramInfo& prog(int slot) const { return programs_[slot_prog_[slot]]; }
  // The member of r's group for the role at (r's index + offset) mod the group's size.
  int peer_of(const GroupTable& gt, int rank, long offset, const Op& op) const;
  std::string describe_op(int slot, OpId v) const;

  // --- collectives into flows (collective_expansion.cpp)
  void join_collective_exhaustive(int s, OpId v, const CollectiveWork& c, int ready);
  void expand_collectives_exhaustive();
  // --- exhaustive collectives' steps during the run (live_collective.cpp)
  void count_route_sender(const std::pair<int, int>& eps, int senders);
  void find_exclusive_routes();
  int exclusive_signature(const std::pair<int, int>& eps) const;
  bool join_open_comm(int t, const FlowInfo& flow);
  void start_side(int side);
  const std::vector<double>& group_member_end_s(const CollectiveSchedule& sch, const CollectiveWork& c,
                                                const GroupTable& gt, int group, bool every_link);
  std::map<std::tuple<const GroupTable*, int, double, int, int, double, double, double, int, bool>, std::vector<double>>
      group_ends_;
  bool ring_shares_links(const GroupTable& gt, int group, const CollectiveWork& c);
  void release_step(int side);
  int launch_step_flows(int side, int k, const CollectiveStep& st);
  void flow_arrived(int side, int step);
  void live_flow_done(int t);
  int new_live_flow();
  void expand_collective_folded(int s, OpId v, const CollectiveWork& c, int ready);
  int expand_folded_steps(int s, const CollectiveWork& c, const GroupTable& gt, int g, int prev,
                          std::vector<FlowInfo>& flows, bool& reusable, const FoldedGate& gate);
  int folded_start(int s, OpId v, const CollectiveWork& c, const GroupTable& gt, int g, int ready, FoldedGate& gate);
  FoldedGate ring_gate(int s, const CollectiveWork& c, const GroupTable& gt, int g, int sync);
  int pass_gate(int s, const FoldedGate& gate, int prev, int src_node, int dst_node);
  void folded_member_wait(int s, const CollectiveSchedule& sch, const CollectiveWork& c, const GroupTable& gt, int g,
                          int start, int done);
  void step_routes(int s, int src_node, const CollectiveStep& st, const CollectiveWork& c, const std::vector<int>& members,
                   std::map<std::vector<int>, double>& bytes_of_route,
                   std::map<std::vector<int>, double>& latency_of_route);
  const std::vector<int>& classes_of_group(const GroupTable& gt, int group);
  bool node_slowed(int node) const;
  bool group_has_other_slowed_class(const GroupTable& gt, int group, int own_class);
  void resolve_sync(const PendingSync& p);

  // A task by id: the DAG's (id >= 0) or a live flow's (id < 0).
  Task& task_ref(int t) { return t >= 0 ? tasks_[t] : live_flows_[-1 - t].task; }
  // A flow task's transfer, by task id (the DAG's or a live flow's).
  FlowInfo& flow_of(int t) { return t >= 0 ? flows_[tasks_[t].ref] : live_flows_[-1 - t].info; }
  // A compute task's seconds: its op's cost on its slot's node.
  double compute_s(const Task& task) const {
    return prog(task.ref).op_seconds[task.op] * net_.compute_factor(w_.node_of_rank[fold_.slot_rank[task.ref]]);
  }

  // --- communication kernels' SMs beside compute (sm_share.cpp)
  void prepare_sm_share();
  void apply_kernel_marks(int t);
  double compute_beside_s(const Task& task, int sms) const { return op_beside_s(task.ref, task.op, sms); }
  double op_beside_s(int slot, int op, int sms) const;
  void start_shared_compute(int t, Task& task);
  void begin_shared_op(SlotShare& sh, int slot, int op, double start_s) const;
  bool pass_ended_ops(SlotShare& sh, int slot, double until_s, std::vector<OpTiming>* ops) const;
  void change_share(SlotShare& sh, int slot, double now_s, int sms) const;
  void replay_shared_run(int slot, int head, std::vector<OpTiming>& ops) const;
  double shared_run_end_s(int slot) const;
  void shared_compute_done(int t);
  void set_held_sms(int slot, int sms);
  bool shares_sms(const Task& task) const { return !slot_share_.empty() && prog(task.ref).kernels_hold_sms; }
  std::vector<SlotShare> slot_share_;  // per slot; empty: no collective's kernel holds SMs
  // Sorted by task, then slot; a marked task (Task::marked) finds its marks by binary search, so
  // the other tasks' completions look nothing up.
  std::vector<KernelMark> kernel_marks_;
  // Where merged runs share SMs, per slot: each change of the SMs held, as (date, SMs), in date
  // order (their ops' times for the result: replay_shared_run); else empty.
  std::vector<std::vector<std::pair<double, int>>> share_changes_;

  // --- SimGrid side (simgrid_driver.cpp)
  void build_platform();
  void simulate_tasks();
  void launch(int t);
  void start_delay(int t, double seconds);
  void start_memory_stream(int t, Task& task);
  double memory_stream_bytes(const ComputeWork& c, double seconds) const;
  void part_done(int t);
  void complete(int t);
  void drain();
  void drain_soon();

  void release_run_state();
  SimResult collect_result();

  bool coalesce_;  // EngineOptions::coalesce_independent_flows, exhaustive only
  const Workload& w_;
  const Network& net_;
  const CostModel& cost_;
  Fidelity fid_;
  double overhead_s_;  // the network's per-message sender overhead
  // The sender's serial cost of one message of `bytes`: the overhead and its eager copy.
  double posting_s(double bytes) const { return overhead_s_ + net_.eager_copy_s(bytes); }
  // The wait of a rendezvous message's bulk for the receiver's clear to send: one round trip of
  // the route's latency (Network::rendezvous); 0 for an eager message.
  double handshake_s(double bytes, const std::vector<int>& route) const {
    return handshake_s(bytes, paths_.route_latency_s(route));
  }
  double handshake_s(double bytes, double route_latency_s) const {
    return net_.rendezvous(bytes) ? 2 * route_latency_s : 0;
  }
  Folding fold_;
  PathMap paths_;

  ChunkedVector<Task> tasks_;  // grows without copying (see chunked_vector.hpp)
  ChunkedVector<FlowInfo> flows_;  // the DAG's flows' transfers (Task::ref)
  ChunkedVector<simgrid::s4u::CommPtr> flow_comms_;  // a DAG flow's comm while it runs (Task::ref; not in live_)
  ChunkedVector<std::pair<int, int>> edges_;  // (from, to) in creation order, until finish_edges
  // Successors of task t: succ_[succ_begin_[t] .. succ_begin_[t + 1]), in creation order.
  std::vector<int> succ_begin_;
  std::unique_ptr<int[]> succ_;
  std::vector<ProgramInfo> programs_;  // only the programs some slot runs are prepared
  std::vector<int> slot_prog_;         // slot -> index in programs_ (= Workload program index)
  std::vector<size_t> slot_base_;      // slot -> offset of its op 0 in op_ready_ / op_done_
  std::vector<int> op_ready_, op_done_;  // [slot_base_[slot] + op]
  std::vector<char> slot_slowed_;        // folded: the slot's node is slowed (see PendingSync)
  bool any_slot_slowed_ = false;         // folded: some slot is slowed
  std::vector<char> slot_compute_as_delay_;  // per slot: its program's compute ops form a chain
  // per slot, where the network has a memory path: its memory stream's endpoints ({-1, -1} until
  // one of its compute ops needs them; PathMap::memory_endpoints)
  std::vector<std::pair<int, int>> slot_memory_eps_;

  // exhaustive collectives: instances by (group table, group, sequence number)
  std::map<std::tuple<const GroupTable*, int, int>, int> instance_of_;
  std::vector<CollectiveInstance> instances_;
  std::vector<Participant> participants_;
  std::vector<int> complete_instances_;  // complete, not yet expanded
  std::vector<CollectiveSchedule> schedules_;  // per complete instance
  std::vector<LiveSide> sides_;
  std::vector<LiveFlow> live_flows_;
  std::vector<int> free_flows_;  // indices in live_flows_ to reuse
  CollectiveStep step_scratch_;  // release_step's step, kept to reuse its storage
  // Coalescing independent flows (live_collective.cpp): route -> its senders (a collective side
  // counts 1; a side sending twice to one peer in a step, or a DAG flow, counts 2), and the
  // exclusive routes' signatures; the open comm that later flows of the same drain may ride.
  std::map<std::pair<int, int>, int> route_senders_;
  std::map<std::pair<int, int>, int> exclusive_signature_;
  bool in_drain_ = false;
  int open_head_ = 0, open_tail_ = 0;  // live flow ids of the open comm's first and last flow; 0: none
  double last_flow_end_s_ = -1;  // the latest arrival of a live flow
  std::vector<PendingRecv> recvs_;
  std::vector<PendingSync> syncs_;
  std::map<std::pair<const GroupTable*, int>, std::vector<int>> classes_of_group_;  // folded, cached
  std::map<std::pair<const GroupTable*, int>, std::vector<int>> slowed_classes_of_group_;  // folded, cached
  std::map<std::tuple<const GroupTable*, int, int, double, double>, RingHops> ring_hops_;  // folded, cached
  // Folded: the flows of a slot's collective, one after another, by (slot, group table, group and
  // the work's kind, algorithm, bytes and library figures); a later collective with the same key (the
  // same layer's in the next micro-batch) has the same steps over the same routes, so the same
  // flows. Only collectives whose every step is one send (a run's flows in a chain) are kept.
  using FoldedFlowsKey = std::tuple<int, const GroupTable*, int, int, int, double, double, double, double, double, int, int>;
  std::map<FoldedFlowsKey, std::vector<FlowInfo>> folded_flows_;
  const ForeignRanks& ring_foreign_ranks(const GroupTable& gt, int offset, int s);
  const std::vector<int>& single_send_route(int s, const CollectiveWork& c, const GroupTable& gt, int offset,
                                            int src_node, int dst_node);
  std::map<std::tuple<const GroupTable*, int, int>, ForeignRanks> ring_foreign_;  // folded, cached
  std::map<int, std::vector<int>> ranks_of_class_;  // folded: class -> its ranks (ring_foreign_ranks)

  std::vector<std::vector<simgrid::s4u::Host*>> cg_hosts_;  // per slot
  std::vector<simgrid::s4u::Host*> ep_hosts_;
  double unit_speed_ = 1;
  std::unordered_map<const simgrid::s4u::Activity*, simgrid::s4u::ActivityPtr> live_;
  std::vector<simgrid::s4u::ActivityPtr> finished_;
  DetachedComms detached_;  // keeps SimGrid's list of detached comms empty (detached_comms.hpp)
  std::vector<int> ready_queue_;
  bool drain_pending_ = false;
  SimStats stats_;
};

}  // namespace exasim::detail
