// Sampling a kernel's time in the spirit of SMPI_SAMPLE_LOCAL: run it until the mean is known
// well enough, then stop. The mean is what the cost model uses.
#pragma once
#include <functional>

#include "kernels/real_kernels.hpp"

namespace exasim {

struct SamplerOptions {
  double rel_stderr_target = 0.02;  // stop once stderr(mean) / mean is under this
  int min_iterations = 3;           // never judge convergence on fewer samples (nor on fewer than 2)
  int max_iterations = 50;          // stop, unconverged, after this many
  double max_total_s = 2.0;         // stop, unconverged, once the measured times add up to this (seconds)
};

struct SampleStats {
  double mean_s = 0;      // mean of the measured times, seconds
  double rel_stderr = 0;  // sample stddev / sqrt(n) / mean; +infinity with one sample (unknown)
  int iterations = 0;     // samples taken
  bool converged = false;  // stopped because rel_stderr < rel_stderr_target, not by a limit
};

// Calls timed_once() (returns the seconds one execution took) until the relative standard error
// of the mean (sample stddev / sqrt(n) / mean) is under the target after at least min_iterations
// (and at least 2), or max_iterations or max_total_s (sum of measured times) is reached; converged
// says which. The limits are checked after each sample, convergence first, so a sample that both
// converges and reaches a limit counts as converged. Options out of range (min_iterations < 1,
// max_iterations < min_iterations, a negative target, max_total_s <= 0) throw std::invalid_argument.
SampleStats sample_until_stable(const std::function<double()>& timed_once, const SamplerOptions& o);

// One untimed warm-up run (caches, page faults, OpenBLAS's thread start-up), then
// sample_until_stable over steady_clock timings of run().
SampleStats sample_kernel(KernelRun& run, const SamplerOptions& o);

}  // namespace exasim
