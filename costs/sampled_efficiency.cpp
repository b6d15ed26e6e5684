#include "costs/sampled_efficiency.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "costs/measure.hpp"
#include "kernels/real_kernels.hpp"

namespace exasim {

SampledEfficiency::SampledEfficiency(std::shared_ptr<const HostProfile> peaks, SamplerOptions o, ScalingLimits lim,
                                     std::shared_ptr<SampleCache> cache)
    : peaks_(std::move(peaks)), options_(o), limits_(lim), cache_(std::move(cache)) {
  const std::string here = host_cpu_model();
  if (peaks_->cpu_model != here)
    throw ProfileError(peaks_->file, "/host/cpu_model",
                       fmt::format("a profile of this host's CPU (\"{}\") for the class peaks that --sample measures "
                                   "against, got \"{}\": run `exasim calibrate` here first and pass it with --profile",
                                   here, peaks_->cpu_model));
  set_blas_threads(peaks_->blas_threads);  // measure as the peaks were measured
}

double SampledEfficiency::relative(Kernel k, Precision p, const KernelShape& s) const {
  const Precision measured = peaks_->measured_precision(p);
  const auto key = std::make_tuple(k, measured, s);
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  const KernelMeasurement m = measure_kernel(k, s, measured, options_, limits_, cache_.get());
  const double rate = achieved_rate(k, s, measured, m.time_s);
  const double peak = peaks_->peaks.at({kernel_class(k), measured});
  const double rel = std::clamp(rate / peak, 1e-9, 1.0);
  memo_.emplace(key, rel);
  return rel;
}

std::string SampledEfficiency::describe() const {
  return fmt::format("kernels sampled on this host ({}; {} distinct kernel shapes), class peaks from {}",
                     peaks_->cpu_model, memo_.size(), peaks_->file);
}

}  // namespace exasim
