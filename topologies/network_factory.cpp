#include "topologies/network_factory.hpp"

#include <stdexcept>

#include "topologies/fat_tree.hpp"
#include "topologies/sunway.hpp"
#include "topologies/torus.hpp"

namespace exasim {

std::unique_ptr<Network> make_network(const MachineSpec& m, Precision peak_precision) {
  if (m.family == "sunway") return std::make_unique<SunwayNetwork>(m, peak_precision);
  if (m.family == "gpu_cluster") return std::make_unique<FatTreeNetwork>(m, peak_precision);
  if (m.family == "torus") return std::make_unique<TorusNetwork>(m, peak_precision);
  throw std::invalid_argument("machine " + m.name + ": unknown family '" + m.family +
                              "' (known: sunway, gpu_cluster, torus)");
}

}  // namespace exasim
