// A machine as a scenario describes it (plain values; see topologies/machines/*.json).
#pragma once
#include <map>
#include <string>

#include "sim/cost_model.hpp"
#include "sim/step_graph.hpp"

namespace exasim {

struct MachineSpec {
  std::string name;
  std::string family;  // "sunway"
  int nodes_per_supernode = 256;
  int supernodes = 0;           // how many the machine has
  int core_groups_per_node = 6;
  // The node's device (topologies/devices/*.json): its compute and memory.
  std::string device_name;
  std::map<Precision, double> peak_flops_per_s;  // per node
  std::map<Precision, double> gemm_efficiency;
  double memory_bandwidth_Bps = 0;               // achieved DMA bandwidth per node (layer kernels)
  double optimizer_memory_bandwidth_Bps = 0;     // achieved by the optimizer update; unpublished choice
  double memory_bytes = 0;                       // per node
  double noc_Bps = 0;                            // on-chip network between core groups and NIC
  double upper_level_bandwidth_ratio = 0;        // bandwidth across supernodes / inside (3/16)
  double node_injection_Bps = 0;                 // per direction; unpublished (free parameter)
  double link_latency_s = 0;                     // per hop; unpublished (free parameter)
};

// The node as the cost model sees it.
DeviceProfile device_profile_of(const MachineSpec& m);

}  // namespace exasim
