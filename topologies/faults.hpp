// Failures and slow components of a machine, per family.
//
// job_components: what can interrupt a job on the given devices (network nodes, one per rank:
// Workload::node_of_rank) (models/goodput.hpp):
//   sunway       nodes: the job's nodes; links: one NIC cable per node to its supernode switch;
//                switches: one per supernode used (its switch; the upper level above the
//                supernodes' uplinks is redundant and not counted)
//   gpu_cluster  nodes: the machine nodes (a GPU's failure takes its node down); links: one cable per
//                NIC; switches: the leaf switches used (one per rail of each leaf group when rail
//                optimized, else one per leaf group; spines are redundant and not counted)
//   torus        nodes: the chips; links: two cables per chip (its +x and +y links, each shared with
//                a neighbour); switches: none (chips route)
#pragma once
#include <vector>

#include "sim/job_components.hpp"
#include "topologies/machine_spec.hpp"

namespace exasim {

// Throws std::invalid_argument for an unknown family.
JobComponents job_components(const MachineSpec& m, const std::vector<int>& devices);

}  // namespace exasim
