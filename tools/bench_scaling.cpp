// tools/bench --scaling: does a kernel sampled at a scaled-down shape (costs/scaling.hpp), times the
// scaling factor, predict the time of the full shape? Times real kernels, so it lives here and not in
// the unit tests (a loaded machine made the timed test fail). Exit status 1 when an extrapolation is
// off by more than 15 % of the direct time or a sample does not converge, 0 otherwise.
//
// Each step runs the full shape once and the scaled one about `factor` times in a row (as long, so as
// steady), alternating so that a load that comes and goes hits both alike. The direct runs decide
// when to stop (sample_until_stable); the scaled runs' times, taken between them, are judged by the
// same rule. Up to three attempts, until both samples converge.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "costs/sampler.hpp"
#include "costs/scaling.hpp"
#include "kernels/real_kernels.hpp"

using namespace exasim;

namespace {

double time_one_run(KernelRun& r) {
  const auto t0 = std::chrono::steady_clock::now();
  r.run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Extrapolation {
  SampleStats direct, scaled;
  double factor = 1;
  double extrapolated_s() const { return scaled.mean_s * factor; }
};

Extrapolation direct_vs_scaled(Kernel k, const KernelShape& full, Precision p, const ScalingLimits& lowered) {
  const SamplerOptions o{0.03, 10, 40, 1.5};
  const ScaledShape scaled = scale_down(k, full, p, lowered);
  auto direct = KernelRun::make(k, full, p);
  auto small = KernelRun::make(k, scaled.shape, p);
  direct->run();  // warm-up
  small->run();
  const int reps = int(scaled.factor);
  Extrapolation e;
  e.factor = scaled.factor;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    std::vector<double> small_times;
    e.direct = sample_until_stable(
        [&] {
          double t = 0;
          for (int i = 0; i < reps; ++i) t += time_one_run(*small);
          small_times.push_back(t / reps);
          return time_one_run(*direct);
        },
        o);
    std::size_t next = 0;
    const int n = int(small_times.size());
    e.scaled = sample_until_stable([&] { return small_times[next++]; }, SamplerOptions{o.rel_stderr_target, n, n, 1e9});
    std::printf("  %s: direct %.3f ms (%d runs, rel. stderr %.3f), from %s x %.2f: %.3f ms (rel. stderr %.3f)\n",
                describe(k, full).c_str(), e.direct.mean_s * 1e3, e.direct.iterations, e.direct.rel_stderr,
                describe(k, scaled.shape).c_str(), scaled.factor, e.extrapolated_s() * 1e3, e.scaled.rel_stderr);
    if (e.direct.converged && e.scaled.converged) break;
  }
  return e;
}

bool check(const char* what, Kernel k, const KernelShape& full, const ScalingLimits& lim) {
  std::printf("%s\n", what);
  const Extrapolation e = direct_vs_scaled(k, full, Precision::fp32, lim);
  const double err = (e.extrapolated_s() - e.direct.mean_s) / e.direct.mean_s;
  const bool ok = e.factor > 4 && e.direct.converged && e.scaled.converged && std::fabs(err) <= 0.15;
  std::printf("  scaled by %.2f, extrapolation error %+.1f %% (limit 15 %%): %s\n", e.factor, 100 * err,
              ok ? "ok" : (e.direct.converged && e.scaled.converged ? "MISS" : "MISS (did not converge)"));
  return ok;
}

}  // namespace

int main() {
  set_blas_threads(1);  // one core: steadier on a shared host
  bool ok = check("GEMM 256 x 4096 x 2048 (4.3 GFLOP) against 256 x 984 x 984", Kernel::gemm,
                  {{256, 4096, 2048}, 1}, ScalingLimits{0.5e9, 256e6, 64e6});
  ok = check("residual_add of 64 Mi elements (768 MB) against 8 Mi (96 MB)", Kernel::residual_add,
             {{64 << 20, 0, 0}, 1}, ScalingLimits{2e9, 96 << 20, 64e6}) && ok;
  return ok ? 0 : 1;
}
