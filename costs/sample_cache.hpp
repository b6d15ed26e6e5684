// Kernel samples cached on disk, so that a calibration or a `run --sample` does not re-measure
// what this host has measured before. One JSON file:
//   {"format": "exasim-sample-cache", "version": 1,
//    "samples": {"<key>": {"mean_s": 0.0123, "rel_stderr": 0.004, "iterations": 7, "converged": true}, ...}}
// rel_stderr is written as null when it is not finite (a single sample).
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "costs/sampler.hpp"
#include "kernels/kernel_id.hpp"

namespace exasim {

// The "model name" line of /proc/cpuinfo (e.g. "AMD EPYC"), else "unknown".
std::string host_cpu_model();

// The cache key of a sample: the kernel and shape (describe()), the precision and the host, e.g.
// "gemm[256x4096x2048] fp32 on AMD EPYC". `host` is the CPU model, or any finer description of
// what the time depends on (measure.hpp adds the BLAS thread count).
std::string sample_key(Kernel k, const KernelShape& s, Precision p, const std::string& cpu_model);

class SampleCache {
 public:
  // Loads `file` if it exists; a file that is not a sample cache (bad JSON, wrong format or
  // version, a sample missing a field) throws std::runtime_error naming the file.
  explicit SampleCache(std::filesystem::path file);

  std::optional<SampleStats> find(const std::string& key) const;
  void put(const std::string& key, const SampleStats& s);  // replaces an entry with the same key
  // Writes the whole cache: to a temporary file beside it, flushed to disk, then renamed over the
  // file, so that the file is never half-written. Creates the parent folder if needed. Throws
  // std::runtime_error naming the file on failure.
  void save() const;

  const std::filesystem::path& file() const { return file_; }
  std::size_t size() const { return samples_.size(); }

 private:
  std::filesystem::path file_;
  std::map<std::string, SampleStats> samples_;  // sorted: the file's order is deterministic
};

}  // namespace exasim
