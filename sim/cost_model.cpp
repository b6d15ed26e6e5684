#include "sim/cost_model.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace exasim {

RooflineCostModel::RooflineCostModel(DeviceProfile d) : device_(std::move(d)) {
  if (device_.memory_bandwidth_Bps <= 0)
    throw std::invalid_argument("device '" + device_.name + "': memory_bandwidth_Bps must be positive");
  if (device_.optimizer_memory_bandwidth_Bps <= 0)
    throw std::invalid_argument("device '" + device_.name + "': optimizer_memory_bandwidth_Bps must be positive");
}

double RooflineCostModel::compute_time_s(const ComputeWork& w) const {
  auto peak_it = device_.peak_flops_per_s.find(w.precision);
  if (peak_it == device_.peak_flops_per_s.end() || peak_it->second <= 0)
    throw std::invalid_argument("device '" + device_.name + "' has no peak for precision " +
                                to_string(w.precision));
  double eff = 1.0;
  if (w.kernel_class() == KernelClass::gemm) {
    auto e = device_.gemm_efficiency.find(w.precision);
    if (e == device_.gemm_efficiency.end())
      throw std::invalid_argument("device '" + device_.name + "' has no GEMM efficiency for " +
                                  to_string(w.precision));
    eff = e->second;
  }
  const double t_flops = w.flops / (peak_it->second * eff);
  const double bandwidth_Bps = w.kernel_class() == KernelClass::optimizer_update ? device_.optimizer_memory_bandwidth_Bps
                                                                         : device_.memory_bandwidth_Bps;
  const double t_bytes = w.bytes / bandwidth_Bps;
  return std::max(t_flops, t_bytes);
}

std::string RooflineCostModel::describe() const { return "roofline:" + device_.name; }

}  // namespace exasim
