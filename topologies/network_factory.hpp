// The Network of a machine spec, by family: SunwayNetwork, FatTreeNetwork, TorusNetwork.
#pragma once
#include <memory>

#include "sim/network.hpp"
#include "topologies/machine_spec.hpp"

namespace exasim {

// `peak_precision` picks the compute units' nominal host speed. Throws std::invalid_argument
// for an unknown family or an impossible machine.
std::unique_ptr<Network> make_network(const MachineSpec& m, Precision peak_precision);

}  // namespace exasim
