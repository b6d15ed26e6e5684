// `exasim calibrate`: measures this host's kernels over a grid of shapes and turns the
// measurements into a host profile (costs/host_profile.hpp).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "costs/host_profile.hpp"
#include "costs/sample_cache.hpp"
#include "costs/sampler.hpp"
#include "costs/scaling.hpp"

namespace exasim {

struct CalibrationPlan {
  std::string name;  // "quick" or "full"
  SamplerOptions sampler;
  ScalingLimits limits;
  std::map<Kernel, std::vector<std::vector<double>>> axes;  // the grid of each kernel, per dim
  size_t samples() const;                                   // grid points over all kernels and precisions
};

// quick: 64 GEMM shapes (16 to 8,192 on each dim) per precision and every memory-bound kernel
// on a coarse grid, loose stopping rule: under 2 minutes on 2 cores. full: a finer grid and the
// default stopping rule (a benchmark: tools/bench --calibrate).
CalibrationPlan quick_calibration();
// The convolutional kernels' grids (im2col, pool, batch_norm), shared by both plans.
void add_convnet_axes(CalibrationPlan& p, const std::vector<double>& pixels, const std::vector<double>& channels);
CalibrationPlan full_calibration();

// Called after each grid point: what was measured, how many are done, how many in all.
using CalibrationProgress = std::function<void(const std::string& what, size_t done, size_t total)>;

// Measures every grid point (through the cache when one is given) and derives the class
// peaks and efficiencies. The fp16 precision is recorded as a stand-in for fp32: this host's
// BLAS has no half-precision GEMM (kernels/real_kernels.hpp).
HostProfile calibrate_host(const CalibrationPlan& plan, SampleCache* cache, const CalibrationProgress& progress);

// The achieved rate of each grid point of each (kernel, precision) surface, in the surface's point order.
using KernelRates = std::map<std::pair<Kernel, Precision>, std::vector<double>>;
// Sets each class's peak (the best rate at each precision; memory-bound points count only if they move
// at least min_bytes, out of the caches) and each point's efficiency (its rate over that peak).
void derive_efficiencies(HostProfile& hp, const KernelRates& rates, double min_bytes);

// "profiles/host-amd-epyc.json" for "AMD EPYC": the default output file for this host.
std::string default_profile_path(const std::string& cpu_model);

}  // namespace exasim
