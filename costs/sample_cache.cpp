#include "costs/sample_cache.hpp"

#include "sim/files.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace exasim {
namespace {

using json = nlohmann::json;
constexpr const char* kFormat = "exasim-sample-cache";
constexpr int kVersion = 1;

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  const auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

SampleStats stats_from(const json& j) {
  SampleStats s;
  s.mean_s = j.at("mean_s").get<double>();
  const json& r = j.at("rel_stderr");
  s.rel_stderr = r.is_null() ? std::numeric_limits<double>::infinity() : r.get<double>();
  s.iterations = j.at("iterations").get<int>();
  s.converged = j.at("converged").get<bool>();
  return s;
}

json to_json(const SampleStats& s) {
  json j;
  j["mean_s"] = s.mean_s;
  j["rel_stderr"] = std::isfinite(s.rel_stderr) ? json(s.rel_stderr) : json(nullptr);
  j["iterations"] = s.iterations;
  j["converged"] = s.converged;
  return j;
}

}  // namespace

std::string host_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string model = trim(line.substr(colon + 1));
    if (!model.empty()) return model;
  }
  return "unknown";
}

std::string sample_key(Kernel k, const KernelShape& s, Precision p, const std::string& cpu_model) {
  return fmt::format("{} {} on {}", describe(k, s), to_string(p), cpu_model);
}

SampleCache::SampleCache(std::filesystem::path file) : file_(std::move(file)) {
  std::string text;
  if (!read_text_file(file_.string(), text).empty()) return;  // no cache yet
  try {
    const json j = json::parse(text);
    if (!j.is_object() || j.value("format", "") != kFormat)
      throw std::runtime_error(fmt::format("not a sample cache (no \"format\": \"{}\")", kFormat));
    if (j.value("version", 0) != kVersion)
      throw std::runtime_error(
          fmt::format("version {} (this build reads version {})", j.value("version", 0), kVersion));
    for (const auto& [key, value] : j.at("samples").items()) samples_[key] = stats_from(value);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("sample cache {}: {}", file_.string(), e.what()));
  }
}

std::optional<SampleStats> SampleCache::find(const std::string& key) const {
  const auto it = samples_.find(key);
  if (it == samples_.end()) return std::nullopt;
  return it->second;
}

void SampleCache::put(const std::string& key, const SampleStats& s) { samples_[key] = s; }

void SampleCache::save() const {
  json samples = json::object();
  for (const auto& [key, s] : samples_) samples[key] = to_json(s);
  const std::string text = json{{"format", kFormat}, {"version", kVersion}, {"samples", samples}}.dump(2) + "\n";

  const auto fail = [this](const std::string& why) {
    throw std::runtime_error(fmt::format("sample cache {}: cannot save: {}", file_.string(), why));
  };
  try {
    write_outputs({{file_.string(), text}}, /*sync_to_disk=*/true);
  } catch (const OutputError& e) {
    throw std::runtime_error(fmt::format("sample cache {}: cannot save: {}", file_.string(), e.what()));
  }
}

}  // namespace exasim
