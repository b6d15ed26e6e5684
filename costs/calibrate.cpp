#include "costs/calibrate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "costs/measure.hpp"
#include "kernels/real_kernels.hpp"

namespace exasim {

namespace {

std::vector<double> powers(double from, double to, double factor) {
  std::vector<double> v;
  for (double x = from; x <= to * 1.0001; x *= factor) v.push_back(x);
  return v;
}

// All grid points of a kernel's axes, row-major (last axis fastest).
std::vector<KernelShape> grid_shapes(const std::vector<std::vector<double>>& axes) {
  std::vector<KernelShape> out(1);
  for (size_t d = 0; d < axes.size(); ++d) {
    std::vector<KernelShape> next;
    for (const KernelShape& s : out)
      for (double x : axes[d]) {
        KernelShape t = s;
        t.dims[d] = std::int64_t(x);
        next.push_back(t);
      }
    out = std::move(next);
  }
  return out;
}

}  // namespace

// im2col and pool over output pixels x channels x window (a 1 x 1 strided convolution's single tap,
// a 3 x 3 window, a 7 x 7 window), batch norm over pixels x channels.
void add_convnet_axes(CalibrationPlan& p, const std::vector<double>& pixels, const std::vector<double>& channels) {
  p.axes[Kernel::im2col] = {pixels, channels, {1, 9, 49}};
  p.axes[Kernel::pool] = {pixels, channels, {9, 49}};
  p.axes[Kernel::batch_norm] = {pixels, channels};
}

size_t CalibrationPlan::samples() const {
  size_t n = 0;
  for (const auto& [k, ax] : axes) n += grid_shapes(ax).size() * profiled_precisions(k).size();
  return n;
}

CalibrationPlan quick_calibration() {
  CalibrationPlan p;
  p.name = "quick";
  p.sampler.rel_stderr_target = 0.05;
  p.sampler.min_iterations = 3;
  p.sampler.max_iterations = 10;
  p.sampler.max_total_s = 0.15;
  p.limits.max_flops = 0.4e9;
  p.limits.max_bytes = 96e6;
  p.limits.min_bytes = 64e6;  // twice this host's 32 MiB L3: the DRAM-bound regime
  const auto g = powers(16, 8192, 8);  // 16, 128, 1024, 8192
  p.axes[Kernel::gemm] = {g, g, g};
  p.axes[Kernel::softmax] = {powers(256, 262144, 32), powers(16, 8192, 8)};
  p.axes[Kernel::layer_norm] = {powers(256, 262144, 32), powers(16, 8192, 8)};
  p.axes[Kernel::gate_topk] = {powers(256, 262144, 32), powers(16, 4096, 16), {1, 2}};
  p.axes[Kernel::token_permute] = {powers(256, 262144, 32), powers(128, 8192, 8)};
  add_convnet_axes(p, powers(256, 262144, 32), powers(16, 2048, 8));
  const auto n = powers(4096, 268435456, 16);  // 2^12 .. 2^28 elements
  p.axes[Kernel::gelu] = {n};
  p.axes[Kernel::residual_add] = {n};
  p.axes[Kernel::adam] = {n};
  return p;
}

CalibrationPlan full_calibration() {
  CalibrationPlan p;
  p.name = "full";
  p.limits.max_flops = 2e9;
  p.limits.max_bytes = 256e6;
  p.limits.min_bytes = 64e6;
  const auto g = powers(16, 16384, 4);  // 16 .. 16,384
  p.axes[Kernel::gemm] = {g, g, g};
  p.axes[Kernel::softmax] = {powers(64, 262144, 8), powers(16, 16384, 4)};
  p.axes[Kernel::layer_norm] = {powers(64, 262144, 8), powers(16, 16384, 4)};
  p.axes[Kernel::gate_topk] = {powers(64, 262144, 8), powers(16, 16384, 4), {1, 2, 4}};
  p.axes[Kernel::token_permute] = {powers(64, 262144, 8), powers(64, 16384, 4)};
  add_convnet_axes(p, powers(64, 262144, 8), powers(16, 4096, 4));
  const auto n = powers(1024, 268435456, 4);  // 2^10 .. 2^28 elements
  p.axes[Kernel::gelu] = {n};
  p.axes[Kernel::residual_add] = {n};
  p.axes[Kernel::adam] = {n};
  return p;
}

// Class peaks: the best rate of the class at each precision. For the memory-bound classes only
// points that ran out of DRAM count (cache-resident ones can beat DRAM bandwidth; their
// efficiency then exceeds 1 and the cost model caps it), and only kernels whose nominal bytes each
// cross DRAM once: im2col and pooling read every input row once per window tap, and where the cache
// holds the rows (an H100's 50 MB L2 holds 262,144 x 16 fp16 pixels) the taps after the first are
// cache hits, so their nominal rate is not a DRAM rate (measured on an H100: 5.8 TB/s "nominal" on
// 3.35 TB/s HBM3).
void derive_efficiencies(HostProfile& hp, const KernelRates& rates, double min_bytes) {
  for (auto& [key, s] : hp.surfaces) {
    const KernelClass c = kernel_class(key.first);
    if (key.first == Kernel::im2col || key.first == Kernel::pool) continue;
    double& peak = hp.peaks[{c, key.second}];
    const auto& r = rates.at(key);
    for (size_t i = 0; i < s.points.size(); ++i) {
      const bool counts = c == KernelClass::gemm || c == KernelClass::fused_attention ||
                          nominal_work(key.first, s.points[i].measured_shape, key.second).bytes >= min_bytes;
      if (counts) peak = std::max(peak, r[i]);
    }
  }
  for (auto& [key, s] : hp.surfaces) {
    double peak = hp.peaks.at({kernel_class(key.first), key.second});
    if (peak <= 0) {  // no DRAM-resident point in the grid: fall back on the best of all
      for (double x : rates.at(key)) peak = std::max(peak, x);
      hp.peaks[{kernel_class(key.first), key.second}] = peak;
    }
    for (size_t i = 0; i < s.points.size(); ++i) s.points[i].efficiency = rates.at(key)[i] / peak;
  }
}

HostProfile calibrate_host(const CalibrationPlan& plan, SampleCache* cache, const CalibrationProgress& progress) {
  HostProfile hp;
  hp.cpu_model = host_cpu_model();
  hp.blas = blas_description();
  hp.blas_threads = blas_threads();
  hp.created_by = fmt::format("exasim calibrate{}", plan.name == "quick" ? " --quick" : "");
  hp.stand_ins[Precision::fp16] = {
      Precision::fp32,
      "this host has no half-precision GEMM (its BLAS exports no sbgemm/shgemm, its CPU no FP16/BF16 vector units): "
      "fp16 kernels are measured as fp32 on the same shapes; the cost model uses only relative efficiency at a shape"};
  const size_t total = plan.samples();
  size_t done = 0;
  // Measure every point; rates first, efficiencies once the class peaks are known.
  KernelRates rates;
  for (const auto& [kernel, axes] : plan.axes) {
    for (Precision p : profiled_precisions(kernel)) {
      EfficiencySurface s;
      s.kernel = kernel;
      s.precision = p;
      s.axes = axes;
      std::vector<double>& r = rates[{kernel, p}];
      for (const KernelShape& shape : grid_shapes(axes)) {
        const KernelMeasurement m = measure_kernel(kernel, shape, p, plan.sampler, plan.limits, cache);
        ProfilePoint pt;
        pt.shape = shape;
        pt.time_s = m.time_s;
        pt.measured_shape = m.measured_shape;
        pt.scale_factor = m.factor;
        pt.iterations = m.stats.iterations;
        pt.rel_stderr = m.stats.rel_stderr;
        s.points.push_back(pt);
        r.push_back(achieved_rate(kernel, shape, p, m.time_s));
        if (progress) progress(fmt::format("{} {}", describe(kernel, shape), to_string(p)), ++done, total);
      }
      hp.surfaces[{kernel, p}] = std::move(s);
    }
  }
  derive_efficiencies(hp, rates, plan.limits.min_bytes);
  return hp;
}

std::string default_profile_path(const std::string& cpu_model) {
  std::string slug;
  for (char c : cpu_model) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      slug += char(std::tolower(static_cast<unsigned char>(c)));
    else if (!slug.empty() && slug.back() != '-')
      slug += '-';
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  return "profiles/host-" + (slug.empty() ? std::string("unknown") : slug) + ".json";
}

}  // namespace exasim
