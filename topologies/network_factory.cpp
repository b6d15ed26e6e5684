#include "topologies/network_factory.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "sim/physical_range.hpp"

#include "topologies/fat_tree.hpp"
#include "topologies/sunway.hpp"
#include "topologies/torus.hpp"

namespace exasim {

namespace {

std::unique_ptr<Network> build(const MachineSpec& m, Precision peak_precision) {
  if (m.family == "sunway") return std::make_unique<SunwayNetwork>(m, peak_precision);
  if (m.family == "gpu_cluster") return std::make_unique<FatTreeNetwork>(m, peak_precision);
  if (m.family == "torus") return std::make_unique<TorusNetwork>(m, peak_precision);
  throw std::invalid_argument("machine " + m.name + ": unknown family '" + m.family +
                              "' (known: sunway, gpu_cluster, torus)");
}

}  // namespace

void check_link_kinds(const Network& net) {
  for (const LinkKind& k : net.link_kinds()) {
    const PhysicalRange& bw = k.node_private ? kLinkBandwidthRange : kSharedLinkBandwidthRange;
    if (!bw.contains(k.bandwidth_Bps))
      throw std::invalid_argument("link " + k.name + ": expected a bandwidth of " + bw.describe() + ", got " +
                                  fmt::format("{:g}", k.bandwidth_Bps) + " B/s from the machine's numbers");
    if (!kLatencyRange.contains(k.latency_s))
      throw std::invalid_argument("link " + k.name + ": expected a latency of " + kLatencyRange.describe() + ", got " +
                                  fmt::format("{:g}", k.latency_s) + " s from the machine's numbers");
  }
}

std::unique_ptr<Network> make_network(const MachineSpec& m, Precision peak_precision) {
  std::unique_ptr<Network> net = build(m, peak_precision);
  check_link_kinds(*net);
  return net;
}

}  // namespace exasim
