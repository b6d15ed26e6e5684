// The checked JSON reading that the profile files share (host profiles, kernel-time files): every
// failure a ProfileError naming the file, the JSON path and what was expected.
#pragma once
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "costs/host_profile.hpp"

namespace exasim::profile_detail {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}
  [[noreturn]] void fail(const std::string& path, const std::string& expected) const {
    throw ProfileError(file_, path, expected);
  }
  const json& at(const json& obj, const std::string& path, const std::string& key, const std::string& what) const {
    if (!obj.is_object()) fail(path, "expected an object");
    auto it = obj.find(key);
    if (it == obj.end()) fail(path + "/" + key, "missing: expected " + what);
    return *it;
  }
  double positive(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = at(obj, path, key, "a positive number");
    if (!v.is_number() || !(v.get<double>() > 0)) fail(path + "/" + key, "expected a positive number, got " + v.dump());
    return v.get<double>();
  }
  double non_negative(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = at(obj, path, key, "a non-negative number");
    if (!v.is_number() || v.get<double>() < 0) fail(path + "/" + key, "expected a non-negative number, got " + v.dump());
    return v.get<double>();
  }
  // A whole number in [lo, hi], range-checked before it is converted (1e300 iterations is refused,
  // not converted with undefined behaviour).
  int count(const json& obj, const std::string& path, const std::string& key, int lo, int hi) const {
    const json& v = at(obj, path, key, fmt::format("a whole number from {} to {}", lo, hi));
    const double x = v.is_number() ? v.get<double>() : 0;
    if (!v.is_number() || !(x >= lo && x <= hi) || std::floor(x) != x)
      fail(path + "/" + key, fmt::format("expected a whole number from {} to {}, got {}", lo, hi, v.dump()));
    return static_cast<int>(x);
  }
  std::string string(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = at(obj, path, key, "a string");
    if (!v.is_string()) fail(path + "/" + key, "expected a string, got " + v.dump());
    return v.get<std::string>();
  }
  Precision precision(const json& v, const std::string& path) const {
    auto p = v.is_string() ? precision_from_string(v.get<std::string>()) : std::nullopt;
    if (!p) fail(path, "expected a precision (\"fp64\", \"fp32\" or \"fp16\"), got " + v.dump());
    return *p;
  }
  KernelShape shape(const json& v, const std::string& path, int rank) const {
    if (!v.is_array() || int(v.size()) != rank)
      fail(path, fmt::format("expected an array of {} positive integers, got {}", rank, v.dump()));
    KernelShape s;
    for (int i = 0; i < rank; ++i) {
      if (!v[i].is_number_integer() || v[i].get<std::int64_t>() <= 0)
        fail(fmt::format("{}/{}", path, i), "expected a positive integer, got " + v[i].dump());
      s.dims[i] = v[i].get<std::int64_t>();
    }
    return s;
  }
  // Keys allowed in an object; an unknown one is most likely a unit mistake, so say which units.
  void only_keys(const json& obj, const std::string& path, std::initializer_list<const char*> keys,
                 const std::string& hint = "") const {
    for (const auto& item : obj.items()) {
      bool ok = false;
      for (const char* k : keys) ok = ok || item.key() == k;
      if (!ok) {
        std::string list;
        for (const char* k : keys) list += std::string(list.empty() ? "" : ", ") + "\"" + k + "\"";
        fail(path + "/" + item.key(), "unknown key; expected one of " + list + hint);
      }
    }
  }

 private:
  std::string file_;
};

}  // namespace exasim::profile_detail
