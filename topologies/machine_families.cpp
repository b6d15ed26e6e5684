#include "topologies/machine_families.hpp"

#include "topologies/fat_tree.hpp"
#include "topologies/nccl_tuning.hpp"
#include "topologies/inner_level_classes.hpp"
#include "topologies/machine_reader.hpp"
#include "topologies/mpich_tuning.hpp"
#include "topologies/torus.hpp"

namespace exasim {

const std::vector<MachineFamily>& machine_families() {
  static const std::vector<MachineFamily> families{
      {"sunway", read_sunway_machine, "supernodes",
       [](const MachineSpec& s) {
         return std::to_string(s.supernodes) + " supernodes x " + std::to_string(s.nodes_per_supernode) + " nodes";
       }},
      {"gpu_cluster", read_gpu_cluster_machine, "nodes",
       [](const MachineSpec& s) {
         return std::to_string(s.gpu.nodes) + " nodes x " + std::to_string(s.gpu.gpus_per_node) + " GPUs";
       }},
      {"torus", read_torus_machine, "torus_y",
       [](const MachineSpec& s) { return std::to_string(s.torus.x) + " x " + std::to_string(s.torus.y) + " chips"; }},
  };
  return families;
}

// The report's "machine" object: each family's own fields.
nlohmann::json machine_report_json(const MachineSpec& m) {
  nlohmann::json j{{"name", m.name}, {"family", m.family}, {"devices", m.device_count()},
                   {"device_word", m.device_word()}};
  if (m.family == "gpu_cluster") {
    const GpuClusterSpec& g = m.gpu;
    j["nodes"] = g.nodes;
    j["gpus_per_node"] = g.gpus_per_node;
    j["gpus_per_nic"] = g.gpus_per_nic;
    j["nvlink_Bps"] = g.nvlink_Bps;
    j["nvlink_latency_s"] = g.nvlink_latency_s;
    if (g.nvlink_sharp) j["nvlink_sharp"] = true;
    j["nic_Bps"] = g.nic_Bps;
    j["fat_tree"] = {{"nodes_per_leaf_group", g.nodes_per_leaf_group},
                     {"leaf_groups_per_spine_group", g.leaf_groups_per_spine_group},
                     {"rail_optimized", g.rail_optimized},
                     {"leaf_taper", g.leaf_taper},
                     {"spine_taper", g.spine_taper}};
    j["link_latency_s"] = m.link_latency_s;
    if (g.nvlink_step_latency_s > 0) j["nvlink_step_latency_s"] = g.nvlink_step_latency_s;
    if (g.network_step_latency_s > 0) j["network_step_latency_s"] = g.network_step_latency_s;
    if (!g.nccl.name.empty()) j["collective_library"] = g.nccl.name;
    if (m.host_link_Bps > 0) {
      j["host_link_Bps"] = m.host_link_Bps;
      j["host_memory_Bps"] = m.host_memory_Bps;
    }
  } else if (m.family == "torus") {
    j["torus_x"] = m.torus.x;
    j["torus_y"] = m.torus.y;
    j["link_Bps"] = m.torus.link_Bps;
    j["link_latency_s"] = m.link_latency_s;
  } else {
    j["nodes_per_supernode"] = m.nodes_per_supernode;
    j["node_injection_Bps"] = m.node_injection_Bps;
    j["link_latency_s"] = m.link_latency_s;
    j["upper_level_bandwidth_ratio"] = m.upper_level_bandwidth_ratio;
    if (!m.mpich.name.empty()) j["collective_library"] = m.mpich.name;
  }
  return j;
}

void split_classes_for_family(Workload& w, const MachineSpec& m) {
  // On GPU nodes, ranks of one stage differ by whether their ring neighbours share their NVLink.
  if (m.family == "gpu_cluster") split_classes_at_inner_level(w, m.devices_per_inner_level());
}

void adopt_family_collectives(Workload& w, const Network& net, const MachineSpec& m) {
  // On a torus, collectives run as the pod's hardware runs them (2-D torus algorithm, all-to-alls at once).
  if (m.family == "torus") adopt_torus_collectives(w, dynamic_cast<const TorusNetwork&>(net));
  // On GPU nodes, a group with several members per node runs NCCL's channels, one per NIC.
  // ... and NCCL's tuner picks each collective's protocol where the machine names its library.
  // On the Sunway, its MPI (swMPI, MPICH-based) picks each collective's algorithm by size.
  if (m.family == "sunway") adopt_mpich_tuning(w, m.mpich);
  if (m.family == "gpu_cluster") {
    adopt_multi_ring_collectives(w, dynamic_cast<const FatTreeNetwork&>(net));
    adopt_nccl_tuning(w, dynamic_cast<const FatTreeNetwork&>(net), m);
  }
}

}  // namespace exasim
