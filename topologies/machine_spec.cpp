#include "topologies/machine_spec.hpp"

namespace exasim {

DeviceProfile device_profile_of(const MachineSpec& m) {
  DeviceProfile d;
  d.name = m.device_name.empty() ? m.name : m.device_name;
  d.peak_flops_per_s = m.peak_flops_per_s;
  d.gemm_efficiency = m.gemm_efficiency;
  d.memory_bandwidth_Bps = m.memory_bandwidth_Bps;
  d.optimizer_memory_bandwidth_Bps = m.optimizer_memory_bandwidth_Bps;
  return d;
}

}  // namespace exasim
