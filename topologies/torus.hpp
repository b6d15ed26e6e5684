// A 2-D torus of chips as a Network (the "torus" family: a TPU v3 pod).
//
// A network node is one chip (one rank; one compute unit), chip (x, y) = node x + X y. Each
// chip has four private outgoing links, +x, -x, +y, -y, each of link_Bps per direction.
// Routes are dimension-ordered, X then Y; along each dimension the shorter way round
// (wrap-around included). At an exact tie (half-way round a ring of even size) a flow goes the +
// way when its source's and destination's coordinates in the other dimension have an even sum,
// else the - way, so that under uniform traffic every link, and every chip's (a folded
// representative's) own tie traffic, splits evenly over + and - (the pod's routing tables are
// not published: an assumption). A hop crosses the outgoing link of the chip it leaves, so a flow
// to a neighbour crosses one link.
//
// adopt_torus_collectives: collectives as the pod's hardware runs them. A group whose members
// fill a rectangle of the torus (member b L + j at (x0 + j, y0 + b), rows of L chips) whose sides
// close into rings (each spans its torus dimension, or is one or two chips) reduces, scatters and
// gathers with the 2-D torus algorithm (torus_2d, block L; a single row is a bidirectional ring);
// other groups keep the one-way ring; every all-to-all sends all its flows at once (direct) on the
// dimension-ordered routes, so that link sharing sets its time.
//
// x_wraparound false (the TPU v3 multipod: four pods joined in a line along x, a mesh in x): no
// link joins x = X-1 and x = 0 and routes along x go the only way. A group whose rows span x and
// come in pairs runs the 2-D algorithm over snake rings of two rows (out along the first row,
// back along the second, closed by two y links: block 2 L), every ring step one hop and each link
// direction one flow per ring direction, as the torus's rows; the columns' rings then join every
// other row (two hops a step, on a 1 / (2 L) share). A group of one row (or an odd number) runs
// each row in the folded order (folded_ring_order: out along the even x, back along the odd),
// each step up to two hops and each x link direction two flows, twice the torus's row time.
// XLA's ring order on a mesh is not public: both are assumptions (the snake is the one the
// validated ResNet-50 multipod step admits; README, "TPU v3 pods").
#pragma once
#include <set>
#include <utility>
#include <vector>

#include "sim/network.hpp"
#include "sim/workload.hpp"
#include "topologies/machine_spec.hpp"

namespace exasim {

class TorusNetwork final : public Network {
 public:
  enum Kind { x_plus = 0, x_minus = 1, y_plus = 2, y_minus = 3 };

  TorusNetwork(const MachineSpec& m, Precision peak_precision);

  int node_count() const override { return x_ * y_; }
  const std::vector<LinkKind>& link_kinds() const override { return kinds_; }
  void path(int src_node, int dst_node, std::vector<LinkRef>& out) const override;
  int domain_of(int, int node) const override { return node; }
  int compute_units_per_node() const override { return 1; }
  double compute_unit_speed_flops_per_s() const override { return chip_speed_; }
  std::string node_name(int node) const override;

  int node_at(int x, int y) const { return x + x_ * y; }
  // The chip at the far end of `node`'s outgoing link of `kind` (has_link: whether it exists).
  int neighbour(int node, int kind) const;
  // False for the wrap-around links along x of a machine without them (x_wraparound false).
  bool has_link(int node, int kind) const;
  bool x_wraparound() const { return wrap_x_; }
  // Appends the dimension-ordered route from a to b: X then Y (path()) or Y then X.
  void ordered_path(int a, int b, bool x_first, std::vector<LinkRef>& out) const;
  // A route from a to b that avoids failed chips and failed links (a link is (kind, chip it
  // leaves); a failed cable is both its directions): X then Y (path()) when it avoids them, else
  // Y then X, else a shortest path over the surviving links (breadth first from a, each chip's
  // links tried +x, -x, +y, -y). Returns false when no route exists.
  bool route_around(int a, int b, const std::set<int>& failed_chips, const std::set<std::pair<int, int>>& failed_links,
                    std::vector<LinkRef>& out) const;
  int x_size() const { return x_; }
  int y_size() const { return y_; }

 private:
  int x_, y_;
  bool wrap_x_;
  double chip_speed_;
  std::vector<LinkKind> kinds_;
};

// The rows of L chips that `members` fill (member b L + j at (x0 + j, y0 + b), coordinates
// modulo the torus), or 0 when they fill no such rectangle.
int torus_rectangle_row(const TorusNetwork& net, const std::vector<int>& member_nodes);

// The ring order of L chips in a line without wrap-around: 0, 2, 4, ..., then the odd positions
// back, ..., 5, 3, 1 (L = 6: 0 2 4 5 3 1).
std::vector<int> folded_ring_order(int L);

// Rewrites the workload's collectives as the torus runs them (see above): ring and hierarchical
// all-reduces, reduce-scatters and all-gathers over a role whose every group is a rectangle
// (same row length) become torus_2d with that row as the block; all-to-alls become direct.
// Returns the number of ops rewritten.
int adopt_torus_collectives(Workload& w, const TorusNetwork& net);

}  // namespace exasim
