#include "costs/host_profile.hpp"

#include "costs/profile_reader.hpp"
#include "sim/files.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace exasim {

using nlohmann::json;

ProfileError::ProfileError(const std::string& file, const std::string& json_path, const std::string& expected)
    : std::runtime_error(fmt::format("{}: {}: {}", file, json_path.empty() ? "/" : json_path, expected)) {}

const char* peak_key(KernelClass c) {
  return c == KernelClass::gemm || c == KernelClass::fused_attention ? "peak_flops_per_s" : "peak_Bps";
}

double achieved_rate(Kernel k, const KernelShape& s, Precision p, double time_s) {
  const NominalWork w = nominal_work(k, s, p);
  const KernelClass c = kernel_class(k);
  return (c == KernelClass::gemm || c == KernelClass::fused_attention ? w.flops : w.bytes) / time_s;
}

std::vector<Precision> profiled_precisions(Kernel k) {
  if (k == Kernel::adam) return {Precision::fp32};
  return {Precision::fp32, Precision::fp64};
}

namespace {

using profile_detail::Reader;

constexpr const char* kFormat = "exasim-host-profile-1";
constexpr std::array<KernelClass, 3> kClasses = {KernelClass::gemm, KernelClass::memory_bound,
                                                 KernelClass::optimizer_update};
// Held only by a profile measured on a GPU (the fused attention kernels run on no host).
constexpr std::array<KernelClass, 1> kOptionalClasses = {KernelClass::fused_attention};

// Position of x between the grid values (log scale): the lower index and the weight of the upper.
std::pair<size_t, double> bracket(const std::vector<double>& axis, double x) {
  if (axis.size() == 1 || x <= axis.front()) return {0, 0.0};
  if (x >= axis.back()) return {axis.size() - 2, 1.0};
  size_t i = size_t(std::upper_bound(axis.begin(), axis.end(), x) - axis.begin()) - 1;
  const double w = (std::log(x) - std::log(axis[i])) / (std::log(axis[i + 1]) - std::log(axis[i]));
  return {i, w};
}

ProfilePoint read_point(const Reader& r, const json& v, const std::string& path, int rank) {
  if (!v.is_object()) r.fail(path, "expected a point object");
  r.only_keys(v, path, {"shape", "time_s", "efficiency", "measured_shape", "scale_factor", "iterations", "rel_stderr"},
              " (times in seconds: time_s)");
  ProfilePoint p;
  p.shape = r.shape(r.at(v, path, "shape", "the shape"), path + "/shape", rank);
  p.time_s = r.positive(v, path, "time_s");
  p.efficiency = r.positive(v, path, "efficiency");
  p.measured_shape = v.contains("measured_shape") ? r.shape(v["measured_shape"], path + "/measured_shape", rank) : p.shape;
  p.scale_factor = v.contains("scale_factor") ? r.positive(v, path, "scale_factor") : 1.0;
  p.iterations = v.contains("iterations") ? r.count(v, path, "iterations", 0, INT_MAX) : 0;
  // null: a single timed iteration (the time budget ran out), whose spread is unknown.
  p.rel_stderr = !v.contains("rel_stderr")        ? 0.0
                 : v["rel_stderr"].is_null() ? std::numeric_limits<double>::infinity()
                                             : r.non_negative(v, path, "rel_stderr");
  return p;
}

EfficiencySurface read_surface(const Reader& r, const json& v, const std::string& path) {
  if (!v.is_object()) r.fail(path, "expected a kernel entry object");
  r.only_keys(v, path, {"kernel", "precision", "axes", "points"});
  EfficiencySurface s;
  const json& kn = r.at(v, path, "kernel", "a kernel name");
  auto k = kn.is_string() ? profiled_kernel_from_string(kn.get<std::string>()) : std::nullopt;
  if (!k) {
    std::string names;
    for (Kernel x : all_kernels) names += std::string(names.empty() ? "" : ", ") + to_string(x);
    for (Kernel x : fused_attention_kernels) names += std::string(", ") + to_string(x);
    r.fail(path + "/kernel", "expected a kernel (" + names + "), got " + kn.dump());
  }
  s.kernel = *k;
  s.precision = r.precision(r.at(v, path, "precision", "a precision"), path + "/precision");
  const int rank = shape_rank(s.kernel);
  const auto names = shape_axis_names(s.kernel);
  const json& axes = r.at(v, path, "axes", "an object of grid values per dim");
  if (!axes.is_object() || int(axes.size()) != rank)
    r.fail(path + "/axes", fmt::format("expected an object with the {} axes of {}", rank, to_string(s.kernel)));
  size_t count = 1;
  for (int i = 0; i < rank; ++i) {
    const std::string ap = path + "/axes/" + names[i];
    const json& a = r.at(axes, path + "/axes", names[i], "the grid values of this dim");
    if (!a.is_array() || a.empty()) r.fail(ap, "expected a non-empty array of ascending positive integers");
    std::vector<double> values;
    for (const json& x : a) {
      if (!x.is_number() || x.get<double>() <= 0 || (!values.empty() && x.get<double>() <= values.back()))
        r.fail(ap, "expected ascending positive integers, got " + a.dump());
      values.push_back(x.get<double>());
    }
    count *= values.size();
    s.axes.push_back(std::move(values));
  }
  const json& pts = r.at(v, path, "points", "the grid's measured points");
  if (!pts.is_array() || pts.size() != count)
    r.fail(path + "/points", fmt::format("expected {} points (the full grid), got {}", count,
                                         pts.is_array() ? std::to_string(pts.size()) : pts.dump()));
  for (size_t i = 0; i < count; ++i) {
    const std::string pp = fmt::format("{}/points/{}", path, i);
    ProfilePoint p = read_point(r, pts[i], pp, rank);
    // the i-th point must sit at the i-th grid position (row-major)
    size_t rest = i;
    for (int d = rank - 1; d >= 0; --d) {
      const double want = s.axes[d][rest % s.axes[d].size()];
      rest /= s.axes[d].size();
      if (double(p.shape.dims[d]) != want)
        r.fail(pp + "/shape", fmt::format("expected the grid point with {} = {} (points in row-major grid order)",
                                          names[d], want));
    }
    s.points.push_back(p);
  }
  return s;
}

}  // namespace

double EfficiencySurface::lookup(const KernelShape& shape) const {
  const int rank = int(axes.size());
  std::array<std::pair<size_t, double>, 3> br{};
  for (int d = 0; d < rank; ++d) br[d] = bracket(axes[d], std::max<double>(1.0, double(shape.dims[d])));
  double sum = 0;
  for (int corner = 0; corner < (1 << rank); ++corner) {
    double w = 1;
    size_t index = 0;
    for (int d = 0; d < rank; ++d) {
      const bool upper = (corner >> d) & 1;
      const auto [i, t] = br[d];
      const size_t pos = std::min(i + (upper ? 1 : 0), axes[d].size() - 1);
      w *= upper ? t : 1 - t;
      index = index * axes[d].size() + pos;
    }
    if (w > 0) sum += w * std::log(points[index].efficiency);
  }
  return std::exp(sum);  // interpolated in log space: efficiencies span orders of magnitude
}

Precision HostProfile::measured_precision(Precision p) const {
  auto it = stand_ins.find(p);
  return it == stand_ins.end() ? p : it->second.first;
}

void HostProfile::require_precision(Precision p, const std::string& user) const {
  const Precision measured = measured_precision(p);
  for (Kernel k : all_kernels) {
    const std::vector<Precision> ps = profiled_precisions(k);
    if (ps.size() == 1 && p != ps.front()) continue;  // runs at one precision whatever the step's (Adam: fp32)
    if (!surfaces.count({k, measured}) || !peaks.count({kernel_class(k), measured}))
      throw ProfileError(file, "/kernels",
                         fmt::format("expected an entry for kernel \"{}\" at {} and its class peak (or a stand_ins entry "
                                     "for {} naming the precision measured instead): {}",
                                     to_string(k), to_string(measured), to_string(p), user));
  }
}

const EfficiencySurface& HostProfile::surface(Kernel k, Precision p) const {
  auto it = surfaces.find({k, measured_precision(p)});
  if (it == surfaces.end())
    throw std::out_of_range(fmt::format("host profile {} has no {} surface at {}", file, to_string(k), to_string(p)));
  return it->second;
}

double HostProfile::relative_efficiency(Kernel k, Precision p, const KernelShape& s) const {
  return std::min(1.0, surface(k, p).lookup(s));
}

HostProfile parse_host_profile(const std::string& text, const std::string& file) {
  Reader r(file);
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {  // a syntax error, or a number past double's range (1e400)
    r.fail("", std::string("expected JSON: ") + e.what());
  }
  if (!root.is_object()) r.fail("", "expected a host profile object");
  r.only_keys(root, "", {"format", "host", "created_by", "stand_ins", "peaks", "kernels"});
  if (r.string(root, "", "format") != kFormat) r.fail("/format", std::string("expected \"") + kFormat + "\"");
  HostProfile hp;
  hp.file = file;
  const json& host = r.at(root, "", "host", "the host's cpu_model, blas and blas_threads");
  hp.cpu_model = r.string(host, "/host", "cpu_model");
  hp.blas = r.string(host, "/host", "blas");
  hp.blas_threads = r.count(host, "/host", "blas_threads", 1, 65536);
  r.only_keys(host, "/host", {"cpu_model", "blas", "blas_threads", "measured_on"});
  if (host.contains("measured_on")) {
    const std::string on = r.string(host, "/host", "measured_on");
    if (on != "host" && on != "device") r.fail("/host/measured_on", "expected \"host\" or \"device\", got \"" + on + "\"");
    hp.measured_on_device = on == "device";
  }
  hp.created_by = root.contains("created_by") ? r.string(root, "", "created_by") : "";
  if (root.contains("stand_ins")) {
    const json& si = root["stand_ins"];
    if (!si.is_object()) r.fail("/stand_ins", "expected an object: precision -> {precision, reason}");
    for (const auto& item : si.items()) {
      const std::string p = "/stand_ins/" + item.key();
      const Precision from = r.precision(json(item.key()), p);
      const Precision to = r.precision(r.at(item.value(), p, "precision", "the precision measured instead"), p + "/precision");
      hp.stand_ins[from] = {to, r.string(item.value(), p, "reason")};
    }
  }
  const json& peaks = r.at(root, "", "peaks", "the peak of each kernel class");
  if (!peaks.is_object()) r.fail("/peaks", "expected an object: kernel class -> precision -> peak");
  std::vector<KernelClass> classes(kClasses.begin(), kClasses.end());
  for (KernelClass c : kOptionalClasses)
    if (peaks.contains(to_string(c))) classes.push_back(c);
  for (const auto& item : peaks.items()) {
    bool known = false;
    for (KernelClass c : classes) known = known || item.key() == to_string(c);
    if (!known)
      r.fail("/peaks/" + item.key(), "unknown kernel class; expected gemm, memory_bound, optimizer_update or fused_attention");
  }
  for (KernelClass c : classes) {
    const std::string cp = std::string("/peaks/") + to_string(c);
    const json& per_precision = r.at(peaks, "/peaks", to_string(c), std::string("the ") + to_string(c) + " class's peaks");
    if (!per_precision.is_object() || per_precision.empty())
      r.fail(cp, "expected an object: precision -> {\"" + std::string(peak_key(c)) + "\": number}");
    for (const auto& item : per_precision.items()) {
      const std::string pp = cp + "/" + item.key();
      const Precision p = r.precision(json(item.key()), pp);
      r.only_keys(item.value(), pp, {peak_key(c)},
                  std::string(peak_key(c)) == "peak_flops_per_s" ? " (compute peaks in flop/s)" : " (memory-bound peaks in bytes/s)");
      hp.peaks[{c, p}] = r.positive(item.value(), pp, peak_key(c));
    }
  }
  const json& kernels = r.at(root, "", "kernels", "the kernels' efficiency surfaces");
  if (!kernels.is_array()) r.fail("/kernels", "expected an array of kernel entries");
  for (size_t i = 0; i < kernels.size(); ++i) {
    EfficiencySurface s = read_surface(r, kernels[i], fmt::format("/kernels/{}", i));
    if (hp.surfaces.count({s.kernel, s.precision}))
      r.fail(fmt::format("/kernels/{}", i), fmt::format("a second entry for {} at {}", to_string(s.kernel),
                                                         to_string(s.precision)));
    if (!hp.peaks.count({kernel_class(s.kernel), s.precision}))
      r.fail(fmt::format("/kernels/{}", i), fmt::format("expected /peaks/{}/{} for this surface",
                                                         to_string(kernel_class(s.kernel)), to_string(s.precision)));
    hp.surfaces[{s.kernel, s.precision}] = std::move(s);
  }
  for (Kernel k : all_kernels)
    for (Precision p : profiled_precisions(k)) {
      if (!hp.surfaces.count({k, p}))
        r.fail("/kernels", fmt::format("expected an entry for kernel \"{}\" at {}", to_string(k), to_string(p)));
      if (!hp.peaks.count({kernel_class(k), p}))
        r.fail(std::string("/peaks/") + to_string(kernel_class(k)),
               fmt::format("expected a peak at {} (kernel {} needs it)", to_string(p), to_string(k)));
    }
  return hp;
}

HostProfile load_host_profile_file(const std::string& path) {
  std::string text;
  if (!read_text_file(path, text).empty()) throw ProfileError(path, "", "cannot read the file");
  return parse_host_profile(text, path);
}

std::string host_profile_json(const HostProfile& hp) {
  json root;  // nlohmann's json object keeps keys sorted: the text is deterministic
  root["format"] = kFormat;
  root["host"] = {{"cpu_model", hp.cpu_model}, {"blas", hp.blas}, {"blas_threads", hp.blas_threads}};
  if (hp.measured_on_device) root["host"]["measured_on"] = "device";
  root["created_by"] = hp.created_by;
  for (const auto& [from, to] : hp.stand_ins)
    root["stand_ins"][to_string(from)] = {{"precision", to_string(to.first)}, {"reason", to.second}};
  for (const auto& [key, value] : hp.peaks) root["peaks"][to_string(key.first)][to_string(key.second)][peak_key(key.first)] = value;
  json kernels = json::array();
  for (const auto& [key, s] : hp.surfaces) {
    json e;
    e["kernel"] = to_string(s.kernel);
    e["precision"] = to_string(s.precision);
    const auto names = shape_axis_names(s.kernel);
    const int rank = shape_rank(s.kernel);
    for (int d = 0; d < rank; ++d) {
      json a = json::array();
      for (double x : s.axes[d]) a.push_back(std::int64_t(x));
      e["axes"][names[d]] = a;
    }
    json pts = json::array();
    for (const ProfilePoint& p : s.points) {
      json shape = json::array(), measured = json::array();
      for (int d = 0; d < rank; ++d) {
        shape.push_back(p.shape.dims[d]);
        measured.push_back(p.measured_shape.dims[d]);
      }
      pts.push_back({{"shape", shape},
                     {"time_s", p.time_s},
                     {"efficiency", p.efficiency},
                     {"measured_shape", measured},
                     {"scale_factor", p.scale_factor},
                     {"iterations", p.iterations},
                     {"rel_stderr", std::isfinite(p.rel_stderr) ? nlohmann::json(p.rel_stderr) : nlohmann::json(nullptr)}});
    }
    e["points"] = pts;
    kernels.push_back(e);
  }
  root["kernels"] = kernels;
  return root.dump(1) + "\n";
}

}  // namespace exasim
