// Sampling, the sample cache, the scaling rule and measure_kernel. Everything here is
// deterministic (synthetic timers); the extrapolation check that times real kernels is
// tools/bench --scaling.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "costs/measure.hpp"
#include "costs/sample_cache.hpp"
#include "costs/sampler.hpp"
#include "costs/scaling.hpp"
#include "kernels/real_kernels.hpp"
#include "tests/unit/approx.hpp"

using namespace exasim;
namespace fs = std::filesystem;

namespace {

// A timer that returns the given times in turn (the last one repeated), counting its calls.
struct Script {
  std::vector<double> times;
  int calls = 0;
  std::function<double()> timer() {
    return [this] { return times[std::size_t(std::min<int>(calls++, int(times.size()) - 1))]; };
  }
};

// A fresh, empty folder for one test case.
fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("exasim_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_all(const fs::path& f) {
  std::ifstream in(f);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// sample_until_stable
// ------------------------------------------------------------------------------------------------

TEST_CASE("sampler: constant times stop at min_iterations converged") {
  Script s{{0.25}};
  const SampleStats st = sample_until_stable(s.timer(), SamplerOptions{0.02, 3, 50, 100.0});
  CHECK(st.iterations == 3);
  CHECK(s.calls == 3);
  CHECK(st.converged);
  CHECK(st.mean_s == 0.25);
  CHECK(st.rel_stderr == 0);

  // min_iterations 1 still takes 2: one sample has no standard error
  Script one{{0.25}};
  const SampleStats st1 = sample_until_stable(one.timer(), SamplerOptions{0.02, 1, 50, 100.0});
  CHECK(st1.iterations == 2);
  CHECK(st1.converged);
}

TEST_CASE("sampler: stops at the iteration where the relative stderr first drops under the target") {
  // 1.0, 1.2, 0.8, then 1.0 forever: the mean stays 1, the squared deviations add up to 0.08, so
  // rel. stderr(n) = sqrt(0.08 / (n - 1) / n); under 0.02 first when n (n - 1) > 200, i.e. n = 15
  // (14 * 13 = 182, 15 * 14 = 210).
  Script s{{1.0, 1.2, 0.8, 1.0}};
  const SampleStats st = sample_until_stable(s.timer(), SamplerOptions{0.02, 3, 50, 100.0});
  CHECK(st.iterations == 15);
  CHECK(st.converged);
  CHECK(st.mean_s == test::rel(1.0));
  CHECK(st.rel_stderr == test::rel(std::sqrt(0.08 / 14 / 15)));
  CHECK(st.rel_stderr < 0.02);

  // with the target at 0.021 it stops one earlier: sqrt(0.08 / 182) = 0.02097
  Script s2{{1.0, 1.2, 0.8, 1.0}};
  CHECK(sample_until_stable(s2.timer(), SamplerOptions{0.021, 3, 50, 100.0}).iterations == 14);
}

TEST_CASE("sampler: pure alternating noise runs to max_iterations unconverged") {
  // 1, 3, 1, 3, ...: rel. stderr ~ 0.5 / sqrt(n), under 0.02 only after 600 samples
  Script s{{}};
  for (int i = 0; i < 100; ++i) s.times.push_back(i % 2 ? 3.0 : 1.0);
  const SampleStats st = sample_until_stable(s.timer(), SamplerOptions{0.02, 3, 50, 1e9});
  CHECK(st.iterations == 50);
  CHECK(s.calls == 50);
  CHECK_FALSE(st.converged);
  CHECK(st.mean_s == 2.0);
  CHECK(st.rel_stderr == test::rel(std::sqrt(50.0 / 49) / std::sqrt(50.0) / 2));
}

TEST_CASE("sampler: the time budget stops it") {
  // 0.25, 0.75, ...: the measured times add up to 2.0 s at the 4th sample
  Script s{{}};
  for (int i = 0; i < 100; ++i) s.times.push_back(i % 2 ? 0.75 : 0.25);
  const SampleStats st = sample_until_stable(s.timer(), SamplerOptions{0.02, 3, 50, 2.0});
  CHECK(st.iterations == 4);
  CHECK_FALSE(st.converged);
  CHECK(st.mean_s == 0.5);

  // a budget smaller than one sample: one sample, no standard error
  Script big{{5.0}};
  const SampleStats one = sample_until_stable(big.timer(), SamplerOptions{0.02, 3, 50, 2.0});
  CHECK(one.iterations == 1);
  CHECK_FALSE(one.converged);
  CHECK(std::isinf(one.rel_stderr));
}

TEST_CASE("sampler: options out of range throw") {
  Script s{{1.0}};
  CHECK_THROWS_AS(sample_until_stable(s.timer(), SamplerOptions{0.02, 0, 50, 2.0}), std::invalid_argument);
  CHECK_THROWS_AS(sample_until_stable(s.timer(), SamplerOptions{0.02, 5, 4, 2.0}), std::invalid_argument);
  CHECK_THROWS_AS(sample_until_stable(s.timer(), SamplerOptions{-1, 3, 50, 2.0}), std::invalid_argument);
  CHECK_THROWS_AS(sample_until_stable(s.timer(), SamplerOptions{0.02, 3, 50, 0}), std::invalid_argument);
  CHECK(s.calls == 0);
}

namespace {
// A KernelRun that only counts its runs.
class CountingRun final : public KernelRun {
 public:
  CountingRun() : KernelRun(Kernel::residual_add, {{1, 0, 0}, 1}, Precision::fp32) {}
  void run() override { ++runs; }
  std::vector<Buffer> buffers() const override { return {}; }
  int runs = 0;
};
}  // namespace

TEST_CASE("sampler: sample_kernel warms up once untimed then samples run()") {
  CountingRun r;
  const SampleStats st = sample_kernel(r, SamplerOptions{0.02, 3, 7, 10.0});
  CHECK(r.runs == st.iterations + 1);
  CHECK(st.iterations >= 3);
  CHECK(st.iterations <= 7);
  CHECK(st.mean_s >= 0);  // (how short a run is depends on the machine's load: not checked here)
}

// ------------------------------------------------------------------------------------------------
// SampleCache
// ------------------------------------------------------------------------------------------------

TEST_CASE("sample cache: put, save and reload give the samples back") {
  const fs::path dir = scratch("cache_roundtrip");
  const fs::path file = dir / "sub" / "samples.json";  // the folder is created by save()
  {
    SampleCache c(file);
    CHECK(c.size() == 0);
    c.put("a", SampleStats{0.125, 0.01, 7, true});
    c.put("b", SampleStats{3.5, std::numeric_limits<double>::infinity(), 1, false});
    c.put("a", SampleStats{0.25, 0.015, 9, true});  // replaces
    CHECK_FALSE(c.find("c").has_value());
    c.save();
  }
  SampleCache c(file);
  CHECK(c.size() == 2);
  const auto a = c.find("a");
  REQUIRE(a.has_value());
  CHECK(a->mean_s == 0.25);
  CHECK(a->rel_stderr == 0.015);
  CHECK(a->iterations == 9);
  CHECK(a->converged);
  const auto b = c.find("b");
  REQUIRE(b.has_value());
  CHECK(b->mean_s == 3.5);
  CHECK(std::isinf(b->rel_stderr));
  CHECK_FALSE(b->converged);
  CHECK(read_all(file).find("\"rel_stderr\": null") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("sample cache: keys differ by CPU model and precision and shape") {
  const KernelShape s{{256, 4096, 2048}, 1};
  const std::string key = sample_key(Kernel::gemm, s, Precision::fp32, "AMD EPYC");
  CHECK(key == "gemm[256x4096x2048] fp32 on AMD EPYC");
  CHECK(key != sample_key(Kernel::gemm, s, Precision::fp32, "Intel Xeon"));
  CHECK(key != sample_key(Kernel::gemm, s, Precision::fp16, "AMD EPYC"));
  CHECK(key != sample_key(Kernel::gemm, KernelShape{{256, 4096, 2048}, 2}, Precision::fp32, "AMD EPYC"));
  CHECK(key != sample_key(Kernel::gemm, KernelShape{{256, 4096, 1024}, 1}, Precision::fp32, "AMD EPYC"));
  CHECK(sample_key(Kernel::softmax, {{64, 128, 0}, 1}, Precision::fp32, "x") !=
        sample_key(Kernel::layer_norm, {{64, 128, 0}, 1}, Precision::fp32, "x"));
  CHECK_FALSE(host_cpu_model().empty());
  CHECK(host_description().find(host_cpu_model()) == 0);
  CHECK(host_description().find("BLAS thread") != std::string::npos);
}

TEST_CASE("sample cache: a malformed file's error names the file") {
  const fs::path dir = scratch("cache_malformed");
  const auto error_of = [&](const std::string& text) -> std::string {
    const fs::path f = dir / "bad.json";
    std::ofstream(f) << text;
    try {
      SampleCache c(f);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "(no throw)";
  };
  const std::string where = "sample cache " + (dir / "bad.json").string() + ": ";
  CHECK(error_of("{ not json").rfind(where, 0) == 0);
  CHECK(error_of("[]").rfind(where + "not a sample cache", 0) == 0);
  const std::string v2 = R"({"format": "exasim-sample-cache", "version": 2, "samples": {}})";
  CHECK(error_of(v2).rfind(where + "version 2", 0) == 0);
  const std::string missing = R"({"format": "exasim-sample-cache", "version": 1, "samples": {"k": {"mean_s": 1}}})";
  CHECK(error_of(missing).rfind(where, 0) == 0);
  CHECK(error_of(R"({"format": "exasim-sample-cache", "version": 1, "samples": {}})") == "(no throw)");
  fs::remove_all(dir);
}

TEST_CASE("sample cache: save replaces the file whole (temp file and rename)") {
  const fs::path dir = scratch("cache_atomic");
  const fs::path file = dir / "samples.json";
  SampleCache c(file);
  c.put("old", SampleStats{1, 0.01, 3, true});
  c.save();
  const std::string old_text = read_all(file);

  // A reader that opened the old file keeps reading the old file whole: save() wrote a new file
  // and renamed it over the old name; it did not truncate and rewrite the old one in place.
  std::ifstream reader(file);
  for (int i = 0; i < 2000; ++i) c.put("new" + std::to_string(i), SampleStats{2, 0.01, 3, true});
  c.save();
  std::stringstream seen;
  seen << reader.rdbuf();
  CHECK(seen.str() == old_text);
  CHECK(SampleCache(file).size() == 2001);
  // no temporary file left beside it
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) entries += e.path().filename() == "samples.json" ? 1 : 100;
  CHECK(entries == 1);

  // a file that cannot be written: the error names it, the old file stays as it was
  const fs::path blocked = dir / "blocked" / "samples.json";
  fs::create_directories(blocked.parent_path());
  SampleCache b(blocked);
  b.put("x", SampleStats{1, 0.01, 3, true});
  b.save();
  fs::permissions(blocked.parent_path(), fs::perms::owner_read | fs::perms::owner_exec);
  b.put("y", SampleStats{1, 0.01, 3, true});
  if (::access(blocked.parent_path().c_str(), W_OK) != 0) {  // (root can write anyway)
    try {
      b.save();
      FAIL("save() did not throw");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()).find(blocked.string()) != std::string::npos);
    }
    CHECK(SampleCache(blocked).size() == 1);
  }
  fs::permissions(blocked.parent_path(), fs::perms::owner_all);
  fs::remove_all(dir);
}

// ------------------------------------------------------------------------------------------------
// scale_down
// ------------------------------------------------------------------------------------------------

namespace {
double flops(const KernelShape& s) { return nominal_work(Kernel::gemm, s, Precision::fp32).flops; }
}  // namespace

TEST_CASE("scaling: shapes within the limits come back unchanged with factor 1") {
  const ScalingLimits lim;
  const KernelShape g{{512, 512, 512}, 4};  // 1.07 GFLOP
  const ScaledShape sg = scale_down(Kernel::gemm, g, Precision::fp32, lim);
  CHECK(sg.shape == g);
  CHECK(sg.factor == 1);
  const KernelShape small{{1000, 0, 0}, 1};  // under min_bytes too: never scaled up
  CHECK(scale_down(Kernel::gelu, small, Precision::fp32, lim).shape == small);
  CHECK(scale_down(Kernel::gelu, small, Precision::fp32, lim).factor == 1);
}

TEST_CASE("scaling: a GEMM scales its batch first") {
  const KernelShape g{{512, 512, 512}, 64};  // 268 MFLOP a product
  const ScaledShape s = scale_down(Kernel::gemm, g, Precision::fp32, ScalingLimits{});
  CHECK(s.shape.dims == g.dims);
  CHECK(s.shape.batch == 7);  // 7 * 268 MFLOP <= 2 GFLOP < 8 * 268 MFLOP
  CHECK(s.factor == test::rel(64.0 / 7, 1e-15));
  CHECK(s.factor == flops(g) / flops(s.shape));
}

TEST_CASE("scaling: a GEMM scales its largest dim and keeps the skinny one") {
  // 3 x (16 x 65536 x 4096): 25.8 GFLOP; batch to 1, then the largest dim n goes down, m (skinny) and k stay
  const KernelShape g{{16, 65536, 4096}, 3};
  const ScaledShape s = scale_down(Kernel::gemm, g, Precision::fp32, ScalingLimits{});
  CHECK(s.shape.batch == 1);
  CHECK(s.shape.dims[0] == 16);
  CHECK(s.shape.dims[2] == 4096);
  CHECK(s.shape.dims[1] == 15256);  // 2e9 / (2 * 16 * 4096) = 15258.8, down to a multiple of 8
  CHECK(s.shape.dims[1] % 8 == 0);
  CHECK(flops(s.shape) <= 2e9);
  CHECK(s.factor == flops(g) / flops(s.shape));
}

TEST_CASE("scaling: then a GEMM scales its two largest dims together and last all three") {
  // 256 x 4096 x 2048 under 0.5 GFLOP: n down to k (2048) is not enough, then n = k = 984
  const KernelShape g{{256, 4096, 2048}, 1};
  const ScaledShape s = scale_down(Kernel::gemm, g, Precision::fp32, ScalingLimits{0.5e9, 256e6, 64e6});
  CHECK(s.shape.dims[0] == 256);
  CHECK(s.shape.dims[1] == s.shape.dims[2]);
  CHECK(s.shape.dims[1] == 984);  // sqrt(0.5e9 / 512) = 988.2, down to a multiple of 8
  CHECK(s.factor == flops(g) / flops(s.shape));

  // 4096^3: no skinny side, all three go down together (a compute-bound cube)
  const ScaledShape c = scale_down(Kernel::gemm, {{4096, 4096, 4096}, 1}, Precision::fp32, ScalingLimits{});
  CHECK(c.shape.dims[0] == 1000);  // 2 * 1000^3 = 2e9
  CHECK(c.shape.dims[1] == 1000);
  CHECK(c.shape.dims[2] == 1000);

  // a skinny GEMM over max_bytes (not max_flops): the two largest go down, the skinny m = 1 stays
  const ScaledShape b = scale_down(Kernel::gemm, {{1, 20000, 20000}, 1}, Precision::fp32, ScalingLimits{});
  CHECK(b.shape.dims[0] == 1);
  CHECK(nominal_work(Kernel::gemm, b.shape, Precision::fp32).bytes <= 256e6);
  CHECK(b.shape.dims[1] == b.shape.dims[2]);
}

TEST_CASE("scaling: memory-bound kernels scale their rows and keep their row length") {
  const ScalingLimits lim;  // 256 MB max, 64 MB min
  // softmax 1M x 2048 fp32: 16.8 GB moved; rows down to <= 256 MB, cols kept
  const KernelShape sm{{1 << 20, 2048, 0}, 1};
  const ScaledShape s = scale_down(Kernel::softmax, sm, Precision::fp32, lim);
  CHECK(s.shape.dims[1] == 2048);
  CHECK(s.shape.dims[0] == 15624);  // 256e6 / (2 * 2048 * 4) = 15625, down to a multiple of 8
  CHECK(s.factor == double(1 << 20) / 15624);
  // factor is the exact bytes ratio, also with layer_norm's per-column term
  const KernelShape ln{{1 << 20, 4096, 0}, 1};
  const ScaledShape l = scale_down(Kernel::layer_norm, ln, Precision::fp16, lim);
  CHECK(l.shape.dims[1] == 4096);
  CHECK(l.factor == nominal_work(Kernel::layer_norm, ln, Precision::fp16).bytes /
                        nominal_work(Kernel::layer_norm, l.shape, Precision::fp16).bytes);
  // the gate keeps experts and k, the permutation its d_model
  const ScaledShape gt = scale_down(Kernel::gate_topk, {{1 << 24, 64, 2}, 1}, Precision::fp32, lim);
  CHECK(gt.shape.dims[1] == 64);
  CHECK(gt.shape.dims[2] == 2);
  CHECK(nominal_work(Kernel::gate_topk, gt.shape, Precision::fp32).bytes <= 256e6);
  const ScaledShape tp = scale_down(Kernel::token_permute, {{1 << 22, 4096, 0}, 1}, Precision::fp32, lim);
  CHECK(tp.shape.dims[1] == 4096);
  // element-wise: elements scaled
  const ScaledShape a = scale_down(Kernel::adam, {{std::int64_t(1) << 33, 0, 0}, 1}, Precision::fp32, lim);
  CHECK(a.shape.dims[0] == 9142856);  // 256e6 / 28 = 9142857.1, down to a multiple of 8
  CHECK(a.factor == double(std::int64_t(1) << 33) / 9142856);
}

TEST_CASE("scaling: memory-bound rows never go under min_bytes") {
  // rows of 40 MB each (5M fp32 cols, x and y): 6 rows = 240 MB fit in 256 MB
  const KernelShape wide{{100, 5000000, 0}, 1};
  CHECK(scale_down(Kernel::softmax, wide, Precision::fp32, ScalingLimits{}).shape.dims[0] == 6);
  // with max 100 MB and min 90 MB: 2 rows (80 MB) fit under max but are under min -> 3 rows (120 MB)
  const ScaledShape s = scale_down(Kernel::softmax, wide, Precision::fp32, ScalingLimits{2e9, 100e6, 90e6});
  CHECK(s.shape.dims[0] == 3);
  CHECK(s.factor == test::rel(100.0 / 3));
}

TEST_CASE("scaling: bad limits and bad shapes throw") {
  const KernelShape g{{64, 64, 64}, 1};
  CHECK_THROWS_AS(scale_down(Kernel::gemm, g, Precision::fp32, ScalingLimits{0, 1e6, 0}), std::invalid_argument);
  CHECK_THROWS_AS(scale_down(Kernel::gemm, g, Precision::fp32, ScalingLimits{1e9, 1e6, 2e6}), std::invalid_argument);
  CHECK_THROWS_AS(scale_down(Kernel::gemm, {{64, 0, 64}, 1}, Precision::fp32, ScalingLimits{}), std::invalid_argument);
}

// ------------------------------------------------------------------------------------------------
// measure_kernel
// ------------------------------------------------------------------------------------------------

TEST_CASE("measure_kernel: scales, samples, caches by the measured shape") {
  const fs::path dir = scratch("measure_cache");
  SampleCache cache(dir / "samples.json");
  // At most 5 runs, and no time budget: on a loaded machine (or under a sanitizer) one run may take
  // longer than any budget, and the sample would stop after one (the test must not depend on speed).
  const SamplerOptions fast{0.5, 2, 5, 1e9};
  const ScalingLimits lim{2e9, 8 << 20, 2e6};  // small, to keep the test fast
  // gelu of 4 Mi fp16 elements: runs in fp32, 32 MiB moved, scaled to 8 MiB (1 Mi elements), factor 4
  const KernelShape full{{1 << 22, 0, 0}, 1};
  const KernelMeasurement m = measure_kernel(Kernel::gelu, full, Precision::fp16, fast, lim, &cache);
  CHECK_FALSE(m.from_cache);
  CHECK(m.measured_shape.dims[0] == 1 << 20);
  CHECK(m.factor == 4);
  CHECK(m.time_s == m.stats.mean_s * 4);
  CHECK(m.stats.iterations >= 2);
  CHECK(m.stand_in == stand_in_note(Kernel::gelu, Precision::fp16));
  CHECK(cache.size() == 1);
  CHECK(cache.find(sample_key(Kernel::gelu, m.measured_shape, Precision::fp16, host_description())).has_value());

  // a larger shape that scales to the same measured shape: from the cache, its own factor
  const KernelMeasurement m2 = measure_kernel(Kernel::gelu, {{1 << 23, 0, 0}, 1}, Precision::fp16, fast, lim, &cache);
  CHECK(m2.from_cache);
  CHECK(m2.measured_shape == m.measured_shape);
  CHECK(m2.factor == 8);
  CHECK(m2.time_s == m.stats.mean_s * 8);
  CHECK(m2.stand_in == m.stand_in);

  // no cache: measured, nothing stored
  const KernelMeasurement m3 = measure_kernel(Kernel::gemm, {{64, 64, 64}, 1}, Precision::fp32, fast, lim, nullptr);
  CHECK_FALSE(m3.from_cache);
  CHECK(m3.factor == 1);
  CHECK(m3.stand_in.empty());
  CHECK(m3.time_s > 0);
  CHECK_THROWS_AS(measure_kernel(Kernel::gemm, {{0, 64, 64}, 1}, Precision::fp32, fast, lim, nullptr),
                  std::invalid_argument);
  fs::remove_all(dir);
}

// The extrapolation check that times real kernels (a scaled-down sample against a direct one)
// is tools/bench --scaling (tools/bench_scaling.cpp): no timed assertion in the unit tests.
