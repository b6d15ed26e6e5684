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
//  * pairwise all-to-all, n-1 steps: step k exchanges a chunk with the members at distance k+1;
//  * direct all-to-all, one step: every chunk at once;
//  * hierarchical all-to-all over blocks of L local members (D = n / L blocks): L-1 pairwise
//    steps inside the block, each carrying the D chunks bound for the peer's offset in every
//    block, then D-1 pairwise steps among the members at the same offset of every block, each
//    carrying the L chunks bound for that block.
#pragma once
#include <stdexcept>
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
  CollectiveSchedule(CollectiveKind kind, CollectiveAlgorithm algorithm, int group_size, double bytes,
                     int block_size = 1);

  int step_count() const { return steps_; }
  int group_size() const { return n_; }
  // Messages a member sends over the whole collective (direct all-to-all: n-1 in its one step).
  int messages_per_member() const;
  // Fills `out` with member `m`'s step `k` (0 <= k < step_count()).
  void step(int m, int k, CollectiveStep& out) const;
  // The textbook alpha-beta time on an uncongested network where every flow sees
  // latency alpha_s and bandwidth beta_Bps and a member sends one flow at a time.
  double alpha_beta_time_s(double alpha_s, double beta_Bps) const;

 private:
  bool torus_step_along_block(int k) const;
  void torus_step(int m, int k, CollectiveStep& out) const;
  void multi_ring_step(int m, CollectiveStep& out) const;

  CollectiveKind kind_;
  CollectiveAlgorithm algorithm_;
  int n_;
  double bytes_;
  int block_ = 1;  // L
  int steps_ = 0;
};

}  // namespace exasim
