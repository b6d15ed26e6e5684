#include "topologies/torus.hpp"

#include "topologies/machine_reader.hpp"

#include <algorithm>
#include <boost/range/iterator_range.hpp>
#include <map>
#include <stdexcept>
#include <string>

namespace exasim {

TorusNetwork::TorusNetwork(const MachineSpec& m, Precision peak_precision)
    : x_(m.torus.x), y_(m.torus.y), wrap_x_(m.torus.x_wraparound) {
  if (x_ <= 0 || y_ <= 0) throw std::invalid_argument("torus machine: dimensions must be positive");
  if (!(m.torus.link_Bps > 0)) throw std::invalid_argument("torus machine: link bandwidth must be positive");
  auto peak = m.peak_flops_per_s.find(peak_precision);
  if (peak == m.peak_flops_per_s.end())
    throw std::invalid_argument(std::string("torus machine: no peak for ") + to_string(peak_precision));
  chip_speed_ = peak->second;
  const double B = m.torus.link_Bps, L = m.link_latency_s;
  kinds_ = {{"x_plus", B, L, true}, {"x_minus", B, L, true}, {"y_plus", B, L, true}, {"y_minus", B, L, true}};
}

void TorusNetwork::path(int a, int b, std::vector<LinkRef>& out) const { ordered_path(a, b, true, out); }

void TorusNetwork::ordered_path(int a, int b, bool x_first, std::vector<LinkRef>& out) const {
  int x = a % x_, y = a / x_;
  const int xb = b % x_, yb = b / x_;
  // One dimension: steps the shorter way round; at a tie, + when the source's and the
  // destination's coordinates in the other dimension have an even sum, - when it is odd. Along a
  // dimension without wrap-around (a mesh) the only way: + when the target lies ahead (or is reached).
  auto walk = [&](int& pos, int target, int size, Kind plus, Kind minus, bool along_x, int other) {
    const int ahead = ((target - pos) % size + size) % size;
    const bool forward = along_x && !wrap_x_
                             ? target >= pos
                             : ahead < size - ahead || (ahead == size - ahead && other % 2 == 0);
    const int hops = forward ? ahead : size - ahead;
    for (int h = 0; h < hops; ++h) {
      out.push_back({forward ? plus : minus, along_x ? node_at(pos, y) : node_at(x, pos)});
      pos = ((pos + (forward ? 1 : -1)) % size + size) % size;
    }
  };
  const int xa = x, ya = y;
  if (x_first) {
    walk(x, xb, x_, x_plus, x_minus, true, ya + yb);
    walk(y, yb, y_, y_plus, y_minus, false, xa + xb);
  } else {
    walk(y, yb, y_, y_plus, y_minus, false, xa + xb);
    walk(x, xb, x_, x_plus, x_minus, true, ya + yb);
  }
}

int TorusNetwork::neighbour(int node, int kind) const {
  const int x = node % x_, y = node / x_;
  switch (kind) {
    case x_plus: return node_at((x + 1) % x_, y);
    case x_minus: return node_at((x + x_ - 1) % x_, y);
    case y_plus: return node_at(x, (y + 1) % y_);
    default: return node_at(x, (y + y_ - 1) % y_);
  }
}

bool TorusNetwork::has_link(int node, int kind) const {
  if (wrap_x_) return true;
  const int x = node % x_;
  return !(kind == x_plus && x == x_ - 1) && !(kind == x_minus && x == 0);
}

namespace {
// Breadth first from a over the links `usable` allows; the route to b, or false.
template <class Usable>
bool shortest_route(const TorusNetwork& t, int a, int b, Usable usable, std::vector<LinkRef>& out) {
  std::vector<int> via(static_cast<size_t>(t.node_count()), -1);  // the kind that reached a chip
  std::vector<int> queue{a};
  via[a] = 4;
  for (size_t i = 0; i < queue.size() && via[b] < 0; ++i)
    for (int k = 0; k < 4; ++k) {
      const int n = t.neighbour(queue[i], k);
      if (via[n] < 0 && usable(k, queue[i])) {
        via[n] = k;
        queue.push_back(n);
      }
    }
  if (via[b] < 0) return false;
  static constexpr int back[4] = {TorusNetwork::x_minus, TorusNetwork::x_plus, TorusNetwork::y_minus,
                                  TorusNetwork::y_plus};
  std::vector<LinkRef> rev;
  for (int n = b; n != a;) {
    const int prev = t.neighbour(n, back[via[n]]);
    rev.push_back({via[n], prev});
    n = prev;
  }
  out.insert(out.end(), rev.rbegin(), rev.rend());
  return true;
}
}  // namespace

bool TorusNetwork::route_around(int a, int b, const std::set<int>& failed_chips,
                                const std::set<std::pair<int, int>>& failed_links, std::vector<LinkRef>& out) const {
  const auto usable = [&](int kind, int from) {
    return has_link(from, kind) && !failed_links.count({kind, from}) && !failed_chips.count(from) &&
           !failed_chips.count(neighbour(from, kind));
  };
  std::vector<LinkRef> p;
  for (bool x_first : {true, false}) {
    p.clear();
    ordered_path(a, b, x_first, p);
    if (std::all_of(p.begin(), p.end(), [&](const LinkRef& l) { return usable(l.kind, l.instance); })) {
      out.insert(out.end(), p.begin(), p.end());
      return true;
    }
  }
  return shortest_route(*this, a, b, usable, out);
}

std::string TorusNetwork::node_name(int node) const {
  return "chip" + std::to_string(node % x_) + "_" + std::to_string(node / x_);
}

int torus_rectangle_row(const TorusNetwork& net, const std::vector<int>& nodes) {
  const int X = net.x_size(), Y = net.y_size(), n = static_cast<int>(nodes.size());
  if (n < 2) return 0;
  const int x0 = nodes[0] % X, y0 = nodes[0] / X;
  int L = 1;
  while (L < n && L < X && nodes[L] == net.node_at((x0 + L) % X, y0)) ++L;
  if (n % L != 0 || n / L > Y) return 0;
  for (int m = 0; m < n; ++m)
    if (nodes[m] != net.node_at((x0 + m % L) % X, (y0 + m / L) % Y)) return 0;
  return L;
}

std::vector<int> folded_ring_order(int L) {
  std::vector<int> order;
  for (int j = 0; j < L; j += 2) order.push_back(j);
  for (int j = L - 1 - L % 2; j > 0; j -= 2) order.push_back(j);
  return order;
}

namespace {
// Rings for the rows of L members of every group of `gt` that span the x dimension of a torus
// without wrap-around there (topologies/torus.hpp): with an even number of rows in every group,
// each pair of rows one snake ring (the first row by increasing x, the second back by decreasing
// x), block 2 L; else each row in the folded ring order, block L. Returns the block.
int ring_mesh_rows(GroupTable& gt, const Workload& w, const TorusNetwork& net, int L) {
  const bool pairs = std::all_of(gt.members.begin(), gt.members.end(),
                                 [&](const std::vector<int>& m) { return m.size() < 2 || m.size() % (2 * L) == 0; });
  const std::vector<int> order = folded_ring_order(L);
  const auto x_of = [&](int r) { return w.node_of_rank.at(r) % net.x_size(); };
  for (auto& members : gt.members) {
    if (members.size() < 2) continue;
    std::vector<int> ring;
    for (std::size_t b = 0; b < members.size(); b += L) {
      std::vector<int> row(members.begin() + static_cast<long>(b), members.begin() + static_cast<long>(b) + L);
      std::sort(row.begin(), row.end(), [&](int r, int s) { return x_of(r) < x_of(s); });
      if (pairs && (b / L) % 2 == 1) std::reverse(row.begin(), row.end());
      for (int j = 0; j < L; ++j) ring.push_back(pairs ? row[j] : row[order[j]]);
    }
    members = ring;
  }
  gt.index(w.rank_count);
  return pairs ? 2 * L : L;
}
}  // namespace

int adopt_torus_collectives(Workload& w, const TorusNetwork& net) {
  std::map<std::string, bool> rectangular;  // by role
  for (auto& [role, gt] : w.groups) {
    int row = -1;
    std::vector<int> nodes;
    for (const auto& members : gt.members) {
      if (members.size() < 2) continue;
      nodes.clear();
      for (int r : members) nodes.push_back(w.node_of_rank.at(r));
      int L = torus_rectangle_row(net, nodes);
      // Bidirectional rings need closed rings: a side that spans the torus dimension (its wrap-around
      // link closes it; along x without one, a snake over two rows or the folded order does) or has
      // two chips. On a segment of a row a one-way ring already uses both directions (its closing
      // flow runs back), and the 2-D algorithm would only add contention.
      const int D = L > 0 ? static_cast<int>(nodes.size()) / L : 0;
      const auto closed = [](int side, int dim) { return side <= 2 || side == dim; };
      if (L > 0 && !(closed(L, net.x_size()) && closed(D, net.y_size()))) L = 0;
      if (L == 0 || (row >= 0 && L != row)) {
        row = 0;
        break;
      }
      row = L;
    }
    rectangular[role] = row > 0;
    if (row > 0) gt.block_size = row;
    if (row > 2 && row == net.x_size() && !net.x_wraparound()) gt.block_size = ring_mesh_rows(gt, w, net, row);
  }
  int rewritten = 0;
  for (StepGraph& g : w.programs)
    for (auto v : boost::make_iterator_range(boost::vertices(g))) {
      auto* c = std::get_if<CollectiveWork>(&g[v].work);
      if (!c) continue;
      if (c->kind == CollectiveKind::all_to_all) {
        if (c->algorithm != CollectiveAlgorithm::direct) ++rewritten;
        c->algorithm = CollectiveAlgorithm::direct;
      } else if (rectangular[c->group_role] &&
                 (c->algorithm == CollectiveAlgorithm::ring || c->algorithm == CollectiveAlgorithm::hierarchical)) {
        c->algorithm = CollectiveAlgorithm::torus_2d;
        ++rewritten;
      }
    }
  return rewritten;
}

// The torus family's machine file (topologies/machine_reader.hpp).
void read_torus_machine(const MachineReader& r, const nlohmann::json& m, const std::string& path, MachineSpec& s) {
  r.check_keys(m, path, {"name", "family", "description", "torus_x", "torus_y", "x_wraparound", "device", "link_Bps",
                         "link_latency_s", "checkpoint_write_Bps", "sources"});
  r.check_checkpoint_write_Bps(m, path);
  s.torus.x = r.required_int(m, path, "torus_x");
  s.torus.y = r.required_int(m, path, "torus_y");
  if (MachineReader::has(m, "x_wraparound")) s.torus.x_wraparound = r.required_annotated_bool(m, path, "x_wraparound");
  r.read_device(m, path, s);
  s.torus.link_Bps = r.required_ranged(m, path, "link_Bps", kLinkBandwidthRange);
  s.link_latency_s = r.required_ranged(m, path, "link_latency_s", kLatencyRange);
}

}  // namespace exasim
