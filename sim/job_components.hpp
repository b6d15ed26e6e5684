// The components whose failure interrupts a job: counted per machine family by
// topologies/faults.hpp, turned into a mean time to interrupt and a goodput by models/goodput.hpp.
// (Shared vocabulary of the two sibling layers, as sim/network.hpp is for networks.)
#pragma once

namespace exasim {

struct JobComponents {
  double nodes = 0, links = 0, switches = 0;
};

}  // namespace exasim
