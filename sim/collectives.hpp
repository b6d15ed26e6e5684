// Collective algorithms: a collective among n members becomes, for each member, a
// sequence of steps of point-to-point flows. Step k of a member may start when its
// step k-1 sends are done and its step k-1 receives have arrived (sendrecv semantics).
//
// Algorithms (bytes = B, group size n, chunk = B / n):
//  * ring (all-reduce 2(n-1) steps, reduce-scatter and all-gather n-1): one chunk to the next member;
//  * hierarchical all-reduce over blocks of L local members (D = n / L blocks): ring
//    reduce-scatter inside the block (L-1 steps of B / L), ring all-reduce of that 1/L share
//    among the members at the same offset of every block (2(D-1) steps of B / (L D)), ring
//    all-gather inside the block (L-1 steps of B / L);
//  * 2-D torus (torus_2d; Ying et al., arXiv 1811.06992) over blocks of L members (a torus row;
//    D = n / L rows): all-reduce = reduce-scatter along the rows' rings (L-1 steps), then along
//    the columns' rings on the row's 1/L share (D-1 steps), then the all-gathers back (D-1, L-1).
//    Rings are bidirectional: each step sends half of its share (B / L, or B / (L D) along the
//    columns) to the next member and half to the previous one, so a chip drives its +x and -x
//    (or +y and -y) links at once. reduce-scatter is the first half, all-gather the second;
//  * multi-ring (multi_ring) over blocks of L local members (D = n / L blocks): L rings (channels)
//    over all n members run at once, each on B / L. Channel c visits every block in the order
//    c, c+1, ..., c+L-1 of its offsets and enters the next block at offset c, so the flow that
//    leaves a block leaves from a different member for each channel (one per member). A step of
//    member (b, j) sends the L-1 channels' chunks that stay in the block to (b, j+1) as one flow of
//    (L-1) B / (n L), and the one channel that leaves the block to (b+1, j+1) as B / (n L);
//    all-reduce 2(n-1) steps, reduce-scatter and all-gather n-1, as the ring;
//  * tree (all-reduce; NCCL's double binary tree, src/graph/trees.cc ncclGetDtree and connect.cc)
//    over D = n / L nodes of L consecutive members: 2L channels, each on B / (2L) in C chunks.
//    Channel c's tree: in every node a chain from its head, offset c mod L, through offsets c+1,
//    ..., c+L-1; the heads joined by binary tree c / L over the nodes (tree 0: ncclGetBtree, node 0
//    the root; tree 1 its mirror, D even, or shifted by one, D odd, so that a node interior in one
//    is a leaf in the other). Reduce up, then broadcast down, each pipelined in lockstep steps: a
//    member of height h (0: a chain's tail) sends chunk i to its parent in step i + h; after the
//    R = C + H - 1 steps of the reduce (H: the tree's height, L - 1 + the node tree's), a member of
//    depth d (0: the root) sends chunk i to its children in step R + i + d. 2 (C + H - 1) steps; a
//    step's sends to one peer (all the channels a member passes on to it) are one flow: (2L - 2)
//    chunks to the next member of the chain, one per tree channel it heads across the network.
//  * nvls (all-reduce; NCCL >= 2.17's NVLS on an NVSwitch with NVLink SHARP, one node): every member
//    reads its 1/n share reduced by the switch (multimem.ld_reduce: the switch pulls the share from
//    all n members, so a member's link to the switch sends B and receives B/n) and writes it back
//    with a multicast store (sends B/n, receives the n shares, B); NCCL pipelines the two, so each
//    link carries B (n+1)/n each way at once (search.cc's NVLS graph charges (n+1) x the channel's
//    bandwidth on every GPU's link). On the non-blocking switch of a gpu_cluster node (a flow from a
//    to b crosses nvlink_up(a), nvlink_down(b)) the same link loads are one step in which every
//    member sends B (n+1) / (n (n-1)) to each of the n-1 others: time B (n+1)/n / NVLink;
//  * nvls reduce-scatter and all-gather (NCCL >= 2.18, one node; B the full buffer, NCCL's nBytes):
//    reduce-scatter reads each member's B/n share reduced by the switch (multimem.ld_reduce: the
//    switch pulls the share from all n members), so a member's link to the switch sends B (its copy
//    of every share) and receives B/n; all-gather writes each member's B/n with a multicast store
//    (sends B/n, the switch replicates: receives the n shares, B). One step in which every member
//    sends B / (n-1) to each of the n-1 others: the busier direction of each link (B) is exact, the
//    other (B/n) is charged B too, since flows between members load both directions alike (the
//    switch's reduction or replication is not a member); time B / NVLink alone, contention in
//    the lighter direction overstated;
//  * pairwise all-to-all, n-1 steps: step k exchanges a chunk with the members at distance k+1;
//  * direct all-to-all, one step: every chunk at once;
//  * hierarchical all-to-all over blocks of L local members (D = n / L blocks): L-1 pairwise
//    steps inside the block, each carrying the D chunks bound for the peer's offset in every
//    block, then D-1 pairwise steps among the members at the same offset of every block, each
//    carrying the L chunks bound for that block.
//  * pairwise reduce-scatter (MPICH's long-message reduce-scatter), n-1 steps: step k sends the
//    chunk of the member at distance k+1 to it and receives its own from the member k+1 before;
//  * recursive halving and doubling (MPICH; Thakur, Rabenseifner & Gropp 2005), over the largest
//    power of two p' <= n (L = log2 p'). Where n is not a power of two, MPICH's pre-step: each
//    even member m < 2r (r = n - p') sends its whole buffer to m+1 and sits out; the others take
//    new ranks 0..p'-1 (m+1 of a pair: m / 2; m >= 2r: m - r); a post-step returns the result
//    (all-reduce: the buffer; reduce-scatter: the sitting member's chunk B / n) from m+1 to m.
//    - rabenseifner all-reduce: L recursive-halving steps (step j: new rank xor 2^j, B / 2^(j+1)),
//      then L recursive-doubling steps (new rank xor p'/2^(i+1), B 2^i / p'); on a power of two
//      2 L alpha + 2 (p-1)/p B beta;
//    - rabenseifner reduce-scatter (recursive halving): L steps, step j with new rank xor
//      p' / 2^(j+1), B / 2^(j+1): L alpha + (p-1)/p B beta;
//    - recursive_doubling all-reduce: L steps exchanging the whole buffer (new rank xor 2^j);
//    - recursive_doubling all-gather (a power of two only, as MPICH runs it): L steps, step j
//      sends the 2^j chunks gathered so far (B 2^j / n) to member xor 2^j: L alpha + (n-1)/n B beta.
//    A member sitting out a step, or only receiving in it, is idle in step(); critical_step()
//    gives the sends on the collective's critical path instead (what a folded representative and
//    the closed form follow: see there).
#pragma once
#include <functional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "sim/step_graph.hpp"

namespace exasim {

struct CollectiveStep {
  struct Send {
    int peer;      // member index in the group
    double bytes;
  };
  std::vector<Send> sends;
  std::vector<int> recv_from;  // member indices
};

class CollectiveSchedule {
 public:
  // Throws std::invalid_argument for a kind/algorithm pair that does not exist.
  // block_size: local members per block (hierarchical, torus_2d, multi_ring; must divide group_size).
  // chunks: the tree's chunks per channel (at least 1).
  CollectiveSchedule(CollectiveKind kind, CollectiveAlgorithm algorithm, int group_size, double bytes,
                     int block_size = 1, int chunks = 1);

  int step_count() const { return steps_; }
  int group_size() const { return n_; }
  // Messages a member sends over the whole collective (direct all-to-all: n-1 in its one step).
  int messages_per_member() const;
  // Fills `out` with member `m`'s step `k` (0 <= k < step_count()). A step may be idle (no sends,
  // no receives) or receive only (the halving and doubling algorithms off a power of two).
  void step(int m, int k, CollectiveStep& out) const;
  // Member m's sends in step k alone (step()'s, without working out its receives: cheaper for the tree).
  void sends(int m, int k, std::vector<CollectiveStep::Send>& out) const;
  // The sends of step `k` on the collective's critical path, seen from member m: step() where
  // every member sends in every step. Off a power of two (halving and doubling), every member
  // waits through MPICH's pre- and post-step and through the new ranks' steps: there member m
  // takes the transfer it waits for as its own (the pre/post step's bytes to its pair partner,
  // m xor 1, or m - 1 past the last pair; a sitting member the steps of its partner m + 1, from
  // its own node). Each member then sends what one member of a pair sends, so a link shared by
  // members alike carries the load the exhaustive schedule puts on it (half the members send
  // in a pre-step, each its whole buffer, on its own links).
  void critical_step(int m, int k, CollectiveStep& out) const;
  // The textbook alpha-beta time on an uncongested network where every flow sees
  // latency alpha_s and bandwidth beta_Bps and a member sends one flow at a time.
  double alpha_beta_time_s(double alpha_s, double beta_Bps) const;
  // tree: the steps' largest flow within a node ((2L - 2) chunks; 0 for one member per node) and
  // across nodes (2 chunks, a node's two heads leaving by its NIC; 0 in one node), in bytes.
  double tree_within_node_flow_bytes() const;
  double tree_between_nodes_flow_bytes() const;
  // tree: the channel tree's height H (L - 1 + the node tree's) and a node's parent in tree t (-1: root).
  int tree_height() const { return tree_height_; }
  // tree: when each member's side ends, the steps in lockstep as the exhaustive run takes them (a
  // member's step starts when its previous one's sends are done and receives have arrived, and
  // ends when its own are), each flow lasting flow_s(from, to, bytes) from its sender's step start;
  // flows between nodes count the larger of their sender's and receiver's bytes across nodes in
  // the step (a NIC shared by a node's two heads, or by two children sending to one parent).
  std::vector<double> tree_lockstep_end_s(const std::function<double(int, int, double)>& flow_s) const;
  int tree_node_parent(int t, int node) const { return tree_[t].parent[node]; }

 private:
  bool torus_step_along_block(int k) const;
  void torus_step(int m, int k, CollectiveStep& out) const;
  void multi_ring_step(int m, CollectiveStep& out) const;
  bool halving_doubling() const {
    return algorithm_ == CollectiveAlgorithm::rabenseifner || algorithm_ == CollectiveAlgorithm::recursive_doubling;
  }
  int new_rank(int m) const;   // -1: sits out until the post-step
  int real_member(int r) const;
  // Halving/doubling: the new-rank distance (mask) and bytes of main step j (0 <= j < main steps).
  std::pair<int, double> main_step(int j) const;
  double pair_step_bytes(int k) const;  // the pre-step's (k = 0) or the post-step's bytes
  void halving_doubling_step(int m, int k, bool critical, CollectiveStep& out) const;
  void build_trees();
  void tree_sends(int m, int k, std::vector<CollectiveStep::Send>& out) const;
  void tree_step(int m, int k, CollectiveStep& out) const;
  double tree_chunk_bytes() const { return bytes_ / (2.0 * block_) / chunks_; }
  double nvls_flow_bytes() const {  // to each of the n-1 others: B (n+1)/n (all-reduce), B (the others) in all
    return kind_ == CollectiveKind::all_reduce ? bytes_ * (n_ + 1) / n_ / (n_ - 1) : bytes_ / (n_ - 1);
  }

  struct NodeTree {  // one of the two binary trees over the D nodes
    std::vector<int> parent, height, depth;
    std::vector<std::vector<int>> children;
  };

  CollectiveKind kind_;
  CollectiveAlgorithm algorithm_;
  int n_;
  double bytes_;
  int block_ = 1;  // L
  int steps_ = 0;
  int pof2_ = 1;   // halving/doubling: the largest power of two <= n
  int rem_ = 0;    // n - pof2_
  int log2_ = 0;   // log2 pof2_
  int chunks_ = 1;        // tree: C
  int tree_height_ = 0;   // tree: H
  NodeTree tree_[2];
};

// The schedule of collective c (its wire bytes) over a group of n members in blocks of
// block_size (the group table's); a tree takes its own members per node and chunks from c.
inline CollectiveSchedule schedule_of(const CollectiveWork& c, int n, int block_size) {
  if (c.algorithm == CollectiveAlgorithm::tree)
    return CollectiveSchedule(c.kind, c.algorithm, n, wire_bytes(c), c.tree_members_per_node, c.tree_chunks);
  return CollectiveSchedule(c.kind, c.algorithm, n, wire_bytes(c), block_size);
}

}  // namespace exasim
