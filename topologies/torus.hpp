// A 2-D torus of chips as a Network (the "torus" family: a TPU v3 pod).
//
// A network node is one chip (one rank; one compute unit), chip (x, y) = node x + X y. Each
// chip has four private outgoing links, +x, -x, +y, -y, each of link_Bps per direction.
// Routes are dimension-ordered, X then Y; along each dimension the shorter way round
// (wrap-around included; at an exact tie, the + way). A hop crosses the outgoing link of the
// chip it leaves, so a flow to a neighbour crosses one link.
#pragma once
#include "sim/network.hpp"
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

 private:
  int x_, y_;
  double chip_speed_;
  std::vector<LinkKind> kinds_;
};

}  // namespace exasim
