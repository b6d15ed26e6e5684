// The one call the calibration and `run --sample` use: a kernel's time at a shape on this host.
#pragma once
#include <string>

#include "costs/sample_cache.hpp"
#include "costs/sampler.hpp"
#include "costs/scaling.hpp"
#include "kernels/kernel_id.hpp"

namespace exasim {

struct KernelMeasurement {
  double time_s = 0;           // the full shape's time, seconds: stats.mean_s * factor
  SampleStats stats;           // of the measured (maybe scaled-down) shape
  KernelShape measured_shape;  // the shape that ran
  double factor = 1;           // time_s / stats.mean_s (scaling.hpp)
  std::string stand_in;        // stand_in_note(): "" or what stood in for the kernel (fp16)
  bool from_cache = false;     // stats came from the cache, nothing ran
};

// What a sample's time depends on besides the kernel: the CPU model and the BLAS thread count,
// e.g. "AMD EPYC, 2 BLAS threads". measure_kernel keys its cache entries with it.
std::string host_description();

// Measures one kernel at one shape on this host: scaled down if over the limits (at the precision
// it executes in, executed_precision()), sampled until stable (sample_kernel) or taken from the
// cache when present, extrapolated by the factor. cache may be null. The cache is keyed by the
// MEASURED shape (sample_key(k, measured_shape, p, host_description())), so full shapes that scale
// to the same shape share one sample; new samples are put, not saved: call cache->save() when done.
// Throws std::invalid_argument for a bad shape or bad options.
KernelMeasurement measure_kernel(Kernel k, const KernelShape& s, Precision p, const SamplerOptions& o,
                                 const ScalingLimits& lim, SampleCache* cache);

}  // namespace exasim
