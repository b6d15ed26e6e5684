// `run --sample`: the host's relative efficiencies measured now, on the exact shapes of the step
// graph, instead of interpolated on a profile's grid. Each distinct (kernel, shape, precision)
// is sampled once (or found in the on-disk cache) and reused for every op that repeats it. The
// class peaks they are relative to come from a profile calibrated on this same CPU.
#pragma once
#include <map>
#include <memory>
#include <tuple>

#include "costs/profile_cost_model.hpp"
#include "costs/sample_cache.hpp"
#include "costs/sampler.hpp"
#include "costs/scaling.hpp"

namespace exasim {

class SampledEfficiency final : public HostEfficiency {
 public:
  // Throws ProfileError when `peaks` was calibrated on another CPU than this host's.
  SampledEfficiency(std::shared_ptr<const HostProfile> peaks, SamplerOptions o, ScalingLimits lim,
                    std::shared_ptr<SampleCache> cache);
  double relative(Kernel k, Precision p, const KernelShape& s) const override;
  std::string describe() const override;
  // The class peaks come from the profile at the measured precision.
  void require_precision(Precision p, const std::string& user) const override { peaks_->require_precision(p, user); }
  size_t distinct_samples() const { return memo_.size(); }

 private:
  std::shared_ptr<const HostProfile> peaks_;
  SamplerOptions options_;
  ScalingLimits limits_;
  std::shared_ptr<SampleCache> cache_;
  mutable std::map<std::tuple<Kernel, Precision, KernelShape>, double> memo_;
};

}  // namespace exasim
