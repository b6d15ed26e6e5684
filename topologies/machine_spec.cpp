#include "topologies/machine_spec.hpp"

#include <stdexcept>

namespace exasim {

long long MachineSpec::device_count() const {
  if (family == "sunway") return static_cast<long long>(supernodes) * nodes_per_supernode;
  if (family == "gpu_cluster") return static_cast<long long>(gpu.nodes) * gpu.gpus_per_node;
  if (family == "torus") return static_cast<long long>(torus.x) * torus.y;
  throw std::invalid_argument("machine " + name + ": unknown family '" + family + "'");
}

std::string MachineSpec::device_word() const {
  if (family == "gpu_cluster") return "GPU";
  if (family == "torus") return "chip";
  return "node";
}

int MachineSpec::devices_per_inner_level() const {
  if (family == "sunway") return nodes_per_supernode;
  if (family == "gpu_cluster") return gpu.gpus_per_node;
  if (family == "torus") return torus.x;
  throw std::invalid_argument("machine " + name + ": unknown family '" + family + "'");
}

DeviceProfile device_profile_of(const MachineSpec& m) {
  DeviceProfile d;
  d.name = m.device_name.empty() ? m.name : m.device_name;
  d.peak_flops_per_s = m.peak_flops_per_s;
  d.gemm_efficiency = m.gemm_efficiency;
  d.flash_attention_efficiency = m.flash_attention_efficiency;
  d.half_gemm_ridge_scaled = m.half_gemm_ridge_scaled;
  d.memory_bandwidth_Bps = m.memory_bandwidth_Bps;
  d.optimizer_memory_bandwidth_Bps = m.optimizer_memory_bandwidth_Bps;
  d.host_link_Bps = m.host_link_Bps;
  d.host_memory_Bps = m.host_memory_Bps;
  d.fuses_elementwise = m.fuses_elementwise;
  d.streaming_multiprocessors = m.streaming_multiprocessors;
  d.special_function_ops_per_s = m.special_function_ops_per_s;
  d.vector_unit_ops_per_s = m.vector_unit_ops_per_s;
  d.vector_ops_per_random_word = m.vector_ops_per_random_word;
  d.kernels_measured_on_device = !m.kernel_profile.empty();
  d.matrix_unit_rows = m.matrix_unit_rows;
  d.matrix_unit_columns = m.matrix_unit_columns;
  return d;
}

}  // namespace exasim
