#include "costs/sampler.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace exasim {
namespace {

void check_options(const SamplerOptions& o) {
  if (o.min_iterations < 1) throw std::invalid_argument("sampler: min_iterations must be at least 1");
  if (o.max_iterations < o.min_iterations)
    throw std::invalid_argument("sampler: max_iterations must be at least min_iterations");
  if (!(o.rel_stderr_target >= 0)) throw std::invalid_argument("sampler: rel_stderr_target must be >= 0");
  if (!(o.max_total_s > 0)) throw std::invalid_argument("sampler: max_total_s must be positive");
}

// Running mean and sum of squared deviations (Welford), in seconds.
class Moments {
 public:
  void add(double x) {
    ++n_;
    const double d = x - mean_;
    mean_ += d / n_;
    m2_ += d * (x - mean_);
  }
  int n() const { return n_; }
  double mean() const { return mean_; }
  double rel_stderr() const {
    if (n_ < 2) return std::numeric_limits<double>::infinity();
    const double stderr_s = std::sqrt(m2_ / (n_ - 1)) / std::sqrt(double(n_));
    if (stderr_s == 0) return 0;
    return mean_ > 0 ? stderr_s / mean_ : std::numeric_limits<double>::infinity();
  }

 private:
  int n_ = 0;
  double mean_ = 0, m2_ = 0;
};

}  // namespace

SampleStats sample_until_stable(const std::function<double()>& timed_once, const SamplerOptions& o) {
  check_options(o);
  Moments mom;
  double total_s = 0;
  SampleStats st;
  while (true) {
    const double t = timed_once();
    mom.add(t);
    total_s += t;
    st.mean_s = mom.mean();
    st.rel_stderr = mom.rel_stderr();
    st.iterations = mom.n();
    st.converged = mom.n() >= o.min_iterations && mom.n() >= 2 && st.rel_stderr < o.rel_stderr_target;
    if (st.converged || mom.n() >= o.max_iterations || total_s >= o.max_total_s) return st;
  }
}

SampleStats sample_kernel(KernelRun& run, const SamplerOptions& o) {
  check_options(o);
  run.run();  // warm-up, untimed
  return sample_until_stable(
      [&run] {
        const auto t0 = std::chrono::steady_clock::now();
        run.run();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      },
      o);
}

}  // namespace exasim
