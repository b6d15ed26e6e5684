#include "topologies/torus.hpp"

#include <stdexcept>
#include <string>

namespace exasim {

TorusNetwork::TorusNetwork(const MachineSpec& m, Precision peak_precision) : x_(m.torus.x), y_(m.torus.y) {
  if (x_ <= 0 || y_ <= 0) throw std::invalid_argument("torus machine: dimensions must be positive");
  if (!(m.torus.link_Bps > 0)) throw std::invalid_argument("torus machine: link bandwidth must be positive");
  auto peak = m.peak_flops_per_s.find(peak_precision);
  if (peak == m.peak_flops_per_s.end())
    throw std::invalid_argument(std::string("torus machine: no peak for ") + to_string(peak_precision));
  chip_speed_ = peak->second;
  const double B = m.torus.link_Bps, L = m.link_latency_s;
  kinds_ = {{"x_plus", B, L, true}, {"x_minus", B, L, true}, {"y_plus", B, L, true}, {"y_minus", B, L, true}};
}

void TorusNetwork::path(int a, int b, std::vector<LinkRef>& out) const {
  int x = a % x_, y = a / x_;
  const int xb = b % x_, yb = b / x_;
  // One dimension: steps the shorter way round, the + way at a tie.
  auto walk = [&](int& pos, int target, int size, Kind plus, Kind minus, bool along_x) {
    const int ahead = ((target - pos) % size + size) % size;
    const bool forward = ahead <= size - ahead;
    const int hops = forward ? ahead : size - ahead;
    for (int h = 0; h < hops; ++h) {
      out.push_back({forward ? plus : minus, along_x ? node_at(pos, y) : node_at(x, pos)});
      pos = ((pos + (forward ? 1 : -1)) % size + size) % size;
    }
  };
  walk(x, xb, x_, x_plus, x_minus, true);
  walk(y, yb, y_, y_plus, y_minus, false);
}

std::string TorusNetwork::node_name(int node) const {
  return "chip" + std::to_string(node % x_) + "_" + std::to_string(node / x_);
}

}  // namespace exasim
