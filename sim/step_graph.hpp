// The step graph: what one rank does in one training step, as a DAG of operations.
// The engine knows these ops only as compute work (costed by the cost model) and
// collectives over a named group role; it knows nothing about transformers.
#pragma once
#include <boost/container/container_fwd.hpp>
#include <cstddef>

// (declared before boost's graph headers: boost::graph_detail::find calls container_category
// qualified, so only the overloads declared before its definition are seen; defined below)
namespace boost::graph_detail {
struct vector_tag;
struct unstable_tag;
template <class T, std::size_t N, class A, class O>
vector_tag container_category(const boost::container::small_vector<T, N, A, O>&);
template <class T, std::size_t N, class A, class O>
unstable_tag iterator_stability(const boost::container::small_vector<T, N, A, O>&);
}  // namespace boost::graph_detail

#include <boost/container/small_vector.hpp>
#include <boost/graph/adjacency_list.hpp>
#include <string>
#include <variant>
#include <vector>

#include "kernels/kernel_id.hpp"

namespace exasim {

enum class Phase { forward, backward, optimizer };
enum class CollectiveKind { all_reduce, reduce_scatter, all_gather, all_to_all };
// hierarchical (all-to-all and all-reduce): a first level inside each block of local members,
// a second among the members at the same offset of every block (see collectives.hpp).
// torus_2d (all-reduce, reduce-scatter, all-gather): the 2-D torus algorithm of Ying et al.,
// bidirectional rings along the block (a torus row), then along the other dimension.
// rabenseifner (all-reduce: recursive-halving reduce-scatter then recursive-doubling all-gather;
// reduce-scatter: recursive halving) and recursive_doubling (all-reduce of the whole buffer,
// all-gather): MPICH's algorithms of Thakur, Rabenseifner & Gropp 2005 (see collectives.hpp).
// tree (all-reduce): NCCL's double binary tree (a chain in each node, two complementary binary
// trees over the nodes), pipelined in chunks (see collectives.hpp).
enum class CollectiveAlgorithm { ring, pairwise, direct, hierarchical, torus_2d, multi_ring, rabenseifner, recursive_doubling,
                                 tree, nvls };

const char* to_string(Phase p);
const char* to_string(CollectiveKind k);
const char* to_string(CollectiveAlgorithm a);

// Compute work: a kernel (kernels/kernel_id.hpp) on a shape. The cost model costs it; the
// engine only runs it.
struct ComputeWork {
  Kernel kernel = Kernel::gemm;
  Precision precision = Precision::fp32;
  double flops = 0;  // floating-point operations executed
  double bytes = 0;  // bytes moved to and from memory
  KernelShape shape; // what the kernel runs on (for shape-dependent efficiency)
  // Streaming multiprocessors left to communication kernels that run beside this one (Transformer
  // Engine's userbuffers with set_sm_margin: the GEMM is launched on the device's SMs minus these);
  // 0: the kernel has the whole device. Collectives' kernels running beside it (CollectiveWork::
  // kernel_sms) take the larger of this margin and what they hold, not both (sim/sm_share.cpp).
  int communication_sms = 0;
  // 32-bit random words the kernel draws (a dropout mask: one per element); their generation's
  // vector operations are the device's (DeviceProfile::vector_ops_per_random_word), not flops.
  double random_words = 0;
  // A memory-bound pass of its own over whole tensors (an optimizer's pass, gradient clipping): no
  // producer to fuse into, so a compiler that fuses element-wise ops still streams all its bytes
  // (DeviceProfile::streamed_bytes).
  bool standalone = false;
  KernelClass kernel_class() const { return exasim::kernel_class(kernel); }
};

// The bytes compute op `c`, lasting `seconds`, moves through its node's memory path of `path_Bps`
// (Network::memory_path_kind) beside its execution: what it reads and writes (ComputeWork::bytes), at
// most its seconds at the path's bandwidth; an optimizer update streams at that bandwidth for all of
// its seconds (the device's optimizer bandwidth counts the fused update's bytes, fewer than its passes
// move: sw26010-pro, 28 of 84 bytes a parameter). The replay (Replay::memory_stream_bytes) and the
// analytic estimate (sim/analytic.cpp) both take it.
inline double memory_path_bytes(const ComputeWork& c, double seconds, double path_Bps) {
  const double full = seconds * path_Bps;
  return c.kernel_class() == KernelClass::optimizer_update ? full : (c.bytes < full ? c.bytes : full);
}

struct CollectiveWork {
  CollectiveKind kind = CollectiveKind::all_reduce;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;
  std::string group_role;  // resolved per rank by the workload's group tables
  // all_reduce / reduce_scatter: bytes of the full buffer on each rank;
  // all_gather: bytes of the gathered result; all_to_all: bytes each rank sends in total.
  double bytes = 0;
  // The communication library's choice for this collective (on a gpu_cluster with a
  // "collective_library": NCCL's tuner, topologies/nccl_tuning.hpp); the defaults model none.
  // The protocol's bytes on the wire per byte of data (1 / its bandwidth factor): every flow of the
  // collective carries bytes x this.
  double wire_bytes_factor = 1;
  // Paid once by each member before its first step (NCCL's baseLat of the algorithm and protocol).
  double base_latency_s = 0;
  // The library's latency of one step, within a node and between nodes (NCCL's hwLat of the
  // algorithm and protocol); negative: the network's own (Network::message_latency_s).
  double within_node_step_latency_s = -1;
  double between_nodes_step_latency_s = -1;
  // tree: members per node (the intra-node chain's length; the group's members in consecutive blocks
  // of this many, one block per node) and chunks per channel (NCCL's pipelining, collectives.hpp).
  int tree_members_per_node = 1;
  int tree_chunks = 1;
  // The name of the protocol chosen ("LL", "LL128", "Simple"; "" : none), for reports.
  const char* protocol = "";
  // Streaming multiprocessors the collective's kernel holds on each member from its ready to its end
  // (NCCL: one block per channel, topologies/nccl_tuning.hpp); compute beside it runs on the rest
  // (sim/sm_share.cpp). 0: it takes none (no library described, or copy engines).
  int kernel_sms = 0;
};

// The bytes a collective's flows carry in all (its data times the protocol's wire factor).
inline double wire_bytes(const CollectiveWork& c) { return c.bytes * c.wire_bytes_factor; }

// Point-to-point transfer between two ranks of one group (e.g. adjacent pipeline stages).
// The peer is the member at index (own index + offset) modulo the group's size. A send is
// done when its bytes have arrived; a receive is done when the send with the same tag from
// the member at (own index - offset) has arrived. A tag names one message of the step: it is
// unique among a rank's sends, and a send and its receive carry the same tag.
struct TransferWork {
  enum class Direction { send, recv };
  Direction direction = Direction::send;
  std::string group_role;
  int offset = 1;
  double bytes = 0;  // send: bytes sent; recv: bytes expected (for reports)
  long tag = 0;
};

struct Op {
  std::string name;   // unique, e.g. "L3.fwd.expert_ffn1"
  std::string label;  // what it is, shared by layers, e.g. "expert_ffn1" (for aggregation)
  Phase phase = Phase::forward;
  std::variant<ComputeWork, CollectiveWork, TransferWork> work;
  bool is_compute() const { return std::holds_alternative<ComputeWork>(work); }
};

}  // namespace exasim

// Each op's in- and out-edge lists: a vector that holds its first edge in the vertex itself (most
// ops have one predecessor and one successor), so that adding an op and its edges does not allocate
// two one-edge vectors on the heap (boost's vecS did: two mallocs an op, and a realloc at a second
// successor). Boost's adjacency_list takes a custom selector through container_gen and
// parallel_edge_traits (boost/graph/adjacency_list.hpp); its push, find and erase dispatch on
// container_category and iterator_stability (declared at the top of this file).
namespace exasim {
struct small_edge_vecS {};
}  // namespace exasim
namespace boost {
template <class ValueType>
struct container_gen<exasim::small_edge_vecS, ValueType> {
  typedef boost::container::small_vector<ValueType, 1> type;
};
template <>
struct parallel_edge_traits<exasim::small_edge_vecS> {
  typedef allow_parallel_edge_tag type;
};
namespace graph_detail {
template <class T, std::size_t N, class A, class O>
vector_tag container_category(const boost::container::small_vector<T, N, A, O>&) {
  return vector_tag();
}
template <class T, std::size_t N, class A, class O>
unstable_tag iterator_stability(const boost::container::small_vector<T, N, A, O>&) {
  return unstable_tag();
}
}  // namespace graph_detail
}  // namespace boost

namespace exasim {

// The graph-wide edge list is a vector (boost's default, a std::list, allocates a node per edge;
// no code removes an edge or iterates boost::edges); each op's own edge lists are small_edge_vecS.
using StepGraph = boost::adjacency_list<small_edge_vecS, boost::vecS, boost::bidirectionalS, Op, boost::no_property,
                                        boost::no_property, boost::vecS>;
using OpId = StepGraph::vertex_descriptor;

// Reserves room for `ops` ops and `edges` dependencies, so that a graph built to about a known
// size (the previous pipeline stage's) is not copied as it grows.
void reserve_ops(StepGraph& g, size_t ops, size_t edges);

// Adds an op that runs after all of `deps`; returns its id.
OpId add_op(StepGraph& g, Op op, const std::vector<OpId>& deps);

}  // namespace exasim
