// The Network of a machine spec, by family: SunwayNetwork, FatTreeNetwork, TorusNetwork.
#pragma once
#include <memory>

#include "sim/network.hpp"
#include "topologies/machine_spec.hpp"

namespace exasim {

// `peak_precision` picks the compute units' nominal host speed. Throws std::invalid_argument
// for an unknown family or an impossible machine, including one whose links (derived ones too:
// a supernode's uplink, a spine group's) fall outside their physical range (check_link_kinds).
std::unique_ptr<Network> make_network(const MachineSpec& m, Precision peak_precision);

// Throws std::invalid_argument naming the first link kind whose bandwidth or latency lies outside
// sim/physical_range.hpp's ranges (SimGrid aborts, crashes or hangs on such numbers).
void check_link_kinds(const Network& net);

}  // namespace exasim
