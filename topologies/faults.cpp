#include "topologies/faults.hpp"

#include <set>
#include <stdexcept>

namespace exasim {

namespace {
// How many distinct values of key(device) the job's devices take.
template <class Key>
double distinct(const std::vector<int>& devices, Key key) {
  std::set<long long> seen;
  for (int d : devices) seen.insert(key(d));
  return static_cast<double>(seen.size());
}
}  // namespace

JobComponents job_components(const MachineSpec& m, const std::vector<int>& devices) {
  JobComponents c;
  const double n = distinct(devices, [](int d) { return d; });
  if (m.family == "sunway") {
    c.nodes = n;
    c.links = n;
    c.switches = distinct(devices, [&](int d) { return d / m.nodes_per_supernode; });
  } else if (m.family == "gpu_cluster") {
    const GpuClusterSpec& g = m.gpu;
    const auto node = [&](int d) { return d / g.gpus_per_node; };
    c.nodes = distinct(devices, node);
    c.links = c.nodes * g.nics_per_node();
    c.switches = distinct(devices, [&](int d) { return node(d) / g.nodes_per_leaf_group; }) *
                 (g.rail_optimized ? g.nics_per_node() : 1);
  } else if (m.family == "torus") {
    c.nodes = n;
    c.links = 2 * n;
  } else {
    throw std::invalid_argument("machine " + m.name + ": unknown family '" + m.family + "'");
  }
  return c;
}

}  // namespace exasim
