#include "costs/kernel_times.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <nlohmann/json.hpp>

#include "costs/calibrate.hpp"
#include "costs/profile_reader.hpp"

namespace exasim {

namespace {

using nlohmann::json;
using profile_detail::Reader;

// The grid of one kernel from meta/axes: one ascending array of positive integers per dim.
std::vector<std::vector<double>> read_axes(const Reader& r, const json& v, const std::string& path, Kernel k) {
  if (!v.is_array() || int(v.size()) != shape_rank(k))
    r.fail(path, fmt::format("expected {} axes for {} (one array per dim), got {}", shape_rank(k), to_string(k), v.dump()));
  std::vector<std::vector<double>> axes;
  for (size_t d = 0; d < v.size(); ++d) {
    const std::string p = fmt::format("{}/{}", path, d);
    if (!v[d].is_array() || v[d].empty()) r.fail(p, "expected a non-empty array of grid values");
    std::vector<double> ax;
    for (size_t i = 0; i < v[d].size(); ++i) {
      const json& x = v[d][i];
      if (!x.is_number_integer() || x.get<std::int64_t>() <= 0 || (!ax.empty() && double(x.get<std::int64_t>()) <= ax.back()))
        r.fail(fmt::format("{}/{}", p, i), "expected ascending positive integers, got " + x.dump());
      ax.push_back(double(x.get<std::int64_t>()));
    }
    axes.push_back(std::move(ax));
  }
  return axes;
}

// Row-major position of a shape on its grid, or -1 when a dim is not a grid value.
long grid_index(const std::vector<std::vector<double>>& axes, const KernelShape& s) {
  long index = 0;
  for (size_t d = 0; d < axes.size(); ++d) {
    auto it = std::find(axes[d].begin(), axes[d].end(), double(s.dims[d]));
    if (it == axes[d].end()) return -1;
    index = index * long(axes[d].size()) + long(it - axes[d].begin());
  }
  return index;
}

ProfilePoint read_time(const Reader& r, const json& v, const std::string& path, Kernel k) {
  if (v.contains("error")) r.fail(path + "/error", "expected a measurement; this one failed: " + v["error"].dump());
  r.only_keys(v, path, {"kernel", "precision", "shape", "measured_shape", "scale_factor", "time_s", "iterations", "rel_stderr",
                        "cuda_graph"});
  ProfilePoint pt;
  pt.shape = r.shape(r.at(v, path, "shape", "the shape asked for"), path + "/shape", shape_rank(k));
  pt.measured_shape = r.shape(r.at(v, path, "measured_shape", "the shape that ran"), path + "/measured_shape", shape_rank(k));
  pt.scale_factor = r.positive(v, path, "scale_factor");
  pt.time_s = r.positive(v, path, "time_s");
  pt.iterations = r.count(v, path, "iterations", 1, 1 << 30);
  pt.rel_stderr = r.non_negative(v, path, "rel_stderr");
  return pt;
}

// The fused attention records of one backend: each (seq, head_dim) measured forward and forward +
// backward; the surface's passes axis is {2, 5} (forward: Q K^T and P V; backward: FlashAttention-2's
// five GEMMs), the backward's time the difference. Causal and full-mask records make two kernels.
void add_fused_attention(const Reader& r, const json& times, const std::string& backend, HostProfile& hp,
                         KernelRates& rates, ImportedProfile& out) {
  // (seq, head_dim) -> forward s, backward s, (sequence, head) pairs
  std::map<Kernel, std::map<std::pair<std::int64_t, std::int64_t>, std::tuple<double, double, std::int64_t>>> seen;
  for (size_t i = 0; i < times.size(); ++i) {
    const json& t = times[i];
    const std::string path = fmt::format("/times/{}", i);
    if (!t.is_object() || t.value("kernel", "") != "flash_attention") continue;
    if (r.string(t, path, "backend") != backend) continue;
    if (t.contains("error")) r.fail(path + "/error", "expected a measurement; this one failed: " + t["error"].dump());
    r.only_keys(t, path, {"kernel", "precision", "backend", "causal", "seq", "head_dim", "pairs", "forward_s",
                          "forward_backward_s", "rel_stderr"});
    const json& causal = r.at(t, path, "causal", "true or false");
    if (!causal.is_boolean()) r.fail(path + "/causal", "expected true or false");
    const Kernel k = causal.get<bool>() ? Kernel::flash_attention_causal : Kernel::flash_attention;
    const auto seq = std::int64_t(r.count(t, path, "seq", 1, 1 << 24));
    const auto dh = std::int64_t(r.count(t, path, "head_dim", 1, 4096));
    const double f = r.positive(t, path, "forward_s"), fb = r.positive(t, path, "forward_backward_s");
    if (!(fb > f)) r.fail(path + "/forward_backward_s", "expected more than forward_s");
    const auto pairs = std::int64_t(r.count(t, path, "pairs", 1, 1 << 30));
    if (!seen[k].emplace(std::make_pair(seq, dh), std::make_tuple(f, fb - f, pairs)).second)
      r.fail(path, "a second measurement of the same point");
  }
  for (auto& [k, points] : seen) {
    EfficiencySurface s;
    s.kernel = k;
    s.precision = Precision::fp16;
    std::vector<double> seqs, dhs;
    for (const auto& [key, t] : points) {
      if (std::find(seqs.begin(), seqs.end(), double(key.first)) == seqs.end()) seqs.push_back(double(key.first));
      if (std::find(dhs.begin(), dhs.end(), double(key.second)) == dhs.end()) dhs.push_back(double(key.second));
    }
    std::sort(seqs.begin(), seqs.end());
    std::sort(dhs.begin(), dhs.end());
    s.axes = {seqs, dhs, {2, 5}};
    for (double sq : seqs)
      for (double d : dhs) {
        auto it = points.find({std::int64_t(sq), std::int64_t(d)});
        if (it == points.end())
          r.fail("/times", fmt::format("expected {} at seq {} and head_dim {} ({} backend): the grid is incomplete",
                                       to_string(k), sq, d, backend));
        for (int passes : {2, 5}) {
          ProfilePoint pt;
          const auto [forward_s, backward_s, pairs] = it->second;
          pt.shape = KernelShape{{std::int64_t(sq), std::int64_t(d), passes}, 1};
          pt.measured_shape = pt.shape;
          pt.time_s = passes == 2 ? forward_s : backward_s;  // of `pairs` pairs (the efficiency holds them)
          pt.iterations = 1;
          s.points.push_back(pt);
          const KernelShape ran{{pt.shape.dims[0], pt.shape.dims[1], passes}, pairs};
          rates[{k, Precision::fp16}].push_back(achieved_rate(k, ran, Precision::fp16, pt.time_s));
          ++out.points;
        }
      }
    hp.surfaces[{k, Precision::fp16}] = std::move(s);
  }
}

}  // namespace

ImportedProfile profile_from_kernel_times(const std::string& text, const std::string& file,
                                          const std::string& attention_backend, double min_bytes) {
  const Reader r(file);
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    r.fail("", std::string("expected JSON: ") + e.what());
  }
  if (!root.is_object()) r.fail("", "expected a kernel-times object {meta, times}");
  r.only_keys(root, "", {"meta", "times"});
  const json& meta = r.at(root, "", "meta", "the measuring run's description");
  if (r.string(meta, "/meta", "format") != "exasim-kernel-times-1") r.fail("/meta/format", "expected \"exasim-kernel-times-1\"");
  ImportedProfile out;
  HostProfile& hp = out.profile;
  hp.file = file;
  hp.cpu_model = r.string(meta, "/meta", "device");
  hp.blas = fmt::format("PyTorch {} (CUDA {}, cuDNN {})", r.string(meta, "/meta", "torch"), r.string(meta, "/meta", "cuda"),
                        r.at(meta, "/meta", "cudnn", "the cuDNN version").dump());
  hp.created_by = "tools/calibrate-gpu.py, then exasim calibrate --import-times";
  hp.measured_on_device = true;
  const json& axes = r.at(meta, "/meta", "axes", "each kernel's grid");
  std::map<Kernel, std::vector<std::vector<double>>> grids;
  for (const auto& item : axes.items()) {
    const auto k = profiled_kernel_from_string(item.key());
    if (!k) r.fail("/meta/axes/" + item.key(), "expected a kernel name");
    grids[*k] = read_axes(r, item.value(), "/meta/axes/" + item.key(), *k);
  }
  const json& times = r.at(root, "", "times", "the measurements");
  if (!times.is_array()) r.fail("/times", "expected an array of measurements");
  std::map<std::pair<Kernel, Precision>, std::vector<std::optional<ProfilePoint>>> slots;
  for (size_t i = 0; i < times.size(); ++i) {
    const std::string path = fmt::format("/times/{}", i);
    const json& t = times[i];
    const auto k = profiled_kernel_from_string(r.string(t, path, "kernel"));
    const Precision p = r.precision(r.at(t, path, "precision", "a precision"), path + "/precision");
    if (k && is_fused_attention(*k)) {  // add_fused_attention's, if of the chosen backend
      if (!t.contains("backend") || t["backend"] != attention_backend) ++out.left_out;
      continue;
    }
    if (!k || !grids.count(*k) || p == Precision::fp8) {  // fp8, another backend: evidence for the device file
      ++out.left_out;
      continue;
    }
    const ProfilePoint pt = read_time(r, t, path, *k);
    const long at = grid_index(grids[*k], pt.shape);
    if (at < 0) r.fail(path + "/shape", "expected a point of meta/axes' grid for " + std::string(to_string(*k)));
    auto& v = slots[{*k, p}];
    size_t n = 1;
    for (const auto& ax : grids[*k]) n *= ax.size();
    v.resize(n);
    if (v[size_t(at)]) r.fail(path, "a second measurement of the same point");
    v[size_t(at)] = pt;
  }
  KernelRates rates;
  for (auto& [key, v] : slots) {
    EfficiencySurface s;
    s.kernel = key.first;
    s.precision = key.second;
    s.axes = grids[key.first];
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i]) r.fail("/times", fmt::format("expected every grid point of {} at {}: point {} is missing",
                                                to_string(key.first), to_string(key.second), i));
      s.points.push_back(*v[i]);
      rates[key].push_back(achieved_rate(key.first, v[i]->shape, key.second, v[i]->time_s));
      ++out.points;
    }
    hp.surfaces[key] = std::move(s);
  }
  add_fused_attention(r, times, attention_backend, hp, rates, out);
  derive_efficiencies(hp, rates, min_bytes);
  // The same checks a profile file gets when it is read back.
  (void)parse_host_profile(host_profile_json(hp), file);
  return out;
}

}  // namespace exasim
