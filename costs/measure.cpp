#include "costs/measure.hpp"

#include <fmt/format.h>

#include "kernels/real_kernels.hpp"

namespace exasim {

std::string host_description() {
  const int threads = blas_threads();
  return fmt::format("{}, {} BLAS thread{}", host_cpu_model(), threads, threads == 1 ? "" : "s");
}

KernelMeasurement measure_kernel(Kernel k, const KernelShape& s, Precision p, const SamplerOptions& o,
                                 const ScalingLimits& lim, SampleCache* cache) {
  const ScaledShape scaled = scale_down(k, s, executed_precision(k, p), lim);
  KernelMeasurement m;
  m.measured_shape = scaled.shape;
  m.factor = scaled.factor;
  m.stand_in = stand_in_note(k, p);
  const std::string key = cache ? sample_key(k, scaled.shape, p, host_description()) : "";
  if (cache) {
    if (auto hit = cache->find(key)) {
      m.stats = *hit;
      m.from_cache = true;
    }
  }
  if (!m.from_cache) {
    auto run = KernelRun::make(k, scaled.shape, p);
    m.stats = sample_kernel(*run, o);
    if (cache) cache->put(key, m.stats);
  }
  m.time_s = m.stats.mean_s * m.factor;
  return m;
}

}  // namespace exasim
