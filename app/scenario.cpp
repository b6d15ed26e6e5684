// Strict scenario parser: every key is known, every value is checked, every error names the
// file, the JSON path and what was expected. See app/scenario.hpp for the value types.
#include "app/scenario.hpp"

#include "sim/files.hpp"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/embedded.hpp"
#include "app/profiles.hpp"
#include "models/plan_rules.hpp"
#include "sim/checked_count.hpp"
#include "sim/physical_range.hpp"
#include "topologies/machine_families.hpp"
#include "topologies/machine_reader.hpp"

namespace exasim {

using json = nlohmann::json;

namespace {

std::string format_error(const std::string& file, const std::string& path, const std::string& expected) {
  std::string m = file + ": ";
  if (!path.empty()) m += path + ": ";
  return m + expected;
}

}  // namespace

ScenarioError::ScenarioError(std::string file, std::string json_path, std::string expected)
    : std::runtime_error(format_error(file, json_path, expected)),
      file_(std::move(file)),
      path_(std::move(json_path)),
      expected_(std::move(expected)) {}

const char* to_string(PrecisionPolicy p) {
  switch (p) {
    case PrecisionPolicy::fp32: return "fp32";
    case PrecisionPolicy::mixed: return "mixed";
    case PrecisionPolicy::fp16: return "fp16";
    case PrecisionPolicy::bf16: return "bf16";
    case PrecisionPolicy::apex_o1: return "apex_o1";
    case PrecisionPolicy::apex_o2: return "apex_o2";
    case PrecisionPolicy::fp8: return "fp8";
    case PrecisionPolicy::bf16_matmul: return "bf16_matmul";
  }
  return "?";
}
const char* to_string(GradSync g) {
  return g == GradSync::after_backward ? "after_backward" : g == GradSync::overlap ? "overlap" : "per_tensor";
}
const char* to_string(GradClip c) {
  return c == GradClip::after_reduction ? "after_reduction" : "before_reduction";
}
const char* to_string(Optimizer o) {
  switch (o) {
    case Optimizer::adam: return "adam";
    case Optimizer::lamb: return "lamb";
    case Optimizer::adafactor: return "adafactor";
  }
  return "?";
}
const char* to_string(Layout l) { return l == Layout::moda ? "moda" : "inverse"; }

namespace {

constexpr const char* kMachineDir = "topologies/machines/";
constexpr const char* kDeviceDir = "topologies/devices/";
constexpr const char* kMachineExt = ".json";


std::string child(const std::string& path, const std::string& key) { return path + "/" + escape_token(key); }

std::string quoted(const std::string& s) { return json(s).dump(); }

// "a string (\"abc\")", "a boolean (true)", "-3", ... for "got ..." parts of messages.
std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return std::string("a boolean (") + (v.get<bool>() ? "true" : "false") + ")";
    case json::value_t::string: {
      std::string s = v.dump();
      if (s.size() > 60) s = s.substr(0, 57) + "...";
      return "a string (" + s + ")";
    }
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return v.dump();
    default:
      return std::string("a ") + v.type_name();
  }
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

// The stems of the embedded files directly in `dir` (e.g. the machines or the devices).
std::vector<std::string> embedded_names(const std::string& dir) {
  std::vector<std::string> names;
  const std::string ext = kMachineExt;
  for (const auto& [path, text] : embedded_files()) {
    (void)text;
    if (path.size() <= dir.size() + ext.size()) continue;
    if (path.compare(0, dir.size(), dir) != 0) continue;
    if (path.compare(path.size() - ext.size(), ext.size(), ext) != 0) continue;
    std::string stem = path.substr(dir.size(), path.size() - dir.size() - ext.size());
    if (stem.find('/') != std::string::npos) continue;  // only files directly in the folder
    names.push_back(stem);
  }
  return names;  // sorted: embedded_files() is a std::map
}

// Parses JSON text; syntax errors and duplicate keys (which nlohmann would silently collapse)
// become ScenarioErrors.
json parse_json(const std::string& text, const std::string& file) {
  struct Frame {
    bool array = false;
    std::set<std::string> keys;
    std::string key;
    size_t index = 0;
  };
  std::vector<Frame> stack;
  std::string duplicate_path;
  bool have_duplicate = false;
  auto path_of = [&stack]() {
    std::string p;
    for (const auto& f : stack) p += "/" + (f.array ? std::to_string(f.index) : escape_token(f.key));
    return p;
  };
  auto cb = [&](int /*depth*/, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start: {
        Frame f;
        f.array = (event == json::parse_event_t::array_start);
        stack.push_back(std::move(f));
        break;
      }
      case json::parse_event_t::key:
        if (!stack.empty()) {
          auto& top = stack.back();
          top.key = parsed.get<std::string>();
          if (!top.keys.insert(top.key).second && !have_duplicate) {
            have_duplicate = true;
            duplicate_path = path_of();
          }
        }
        break;
      case json::parse_event_t::value:
        if (!stack.empty() && stack.back().array) ++stack.back().index;
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        if (!stack.empty() && stack.back().array) ++stack.back().index;
        break;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text, cb, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::parse_error& e) {
    throw ScenarioError(file, "", "expected valid JSON, parse error at byte " + std::to_string(e.byte) + ": " +
                                      e.what());
  } catch (const json::exception& e) {
    throw ScenarioError(file, "", std::string("expected valid JSON: ") + e.what());
  }
  if (have_duplicate)
    throw ScenarioError(file, duplicate_path, "duplicate key (each key may appear only once in an object)");
  return j;
}

enum class NumKind { positive_int, positive, non_negative, fraction };

const char* num_desc(NumKind k) {
  switch (k) {
    case NumKind::positive_int:
      return "a positive integer";
    case NumKind::positive:
      return "a positive number";
    case NumKind::non_negative:
      return "a non-negative number";
    case NumKind::fraction:
      return "a number in (0, 1]";
  }
  return "a number";
}

class Reader {
 public:
  // file: labels errors; ann_prefix: prepended to paths recorded in annotations (an embedded
  // machine file is read with paths relative to its own root and recorded under "/machine").
  Reader(std::string file, std::string ann_prefix, std::vector<Annotation>* annotations)
      : file_(std::move(file)), ann_prefix_(std::move(ann_prefix)), annotations_(annotations) {}

  const std::string& file() const { return file_; }
  const std::string& ann_prefix() const { return ann_prefix_; }
  std::vector<Annotation>* annotations() const { return annotations_; }
  // A reader for a file referenced from this one, whose annotations are recorded under `path`.
  Reader nested(std::string file, const std::string& path) const { return Reader(std::move(file), ann_prefix_ + path, annotations_); }

  [[noreturn]] void fail(const std::string& path, const std::string& expected) const {
    throw ScenarioError(file_, path, expected);
  }

  void require_object(const json& v, const std::string& path, const std::string& what) const {
    if (!v.is_object()) fail(path, "expected " + what + ", got " + describe(v));
  }

  void check_keys(const json& obj, const std::string& path, std::initializer_list<const char*> allowed) const {
    for (const auto& item : obj.items()) {
      bool ok = false;
      for (const char* a : allowed)
        if (item.key() == a) {
          ok = true;
          break;
        }
      if (!ok) {
        std::vector<std::string> names(allowed.begin(), allowed.end());
        fail(child(path, item.key()), "unknown key (expected one of: " + join(names, ", ") + ")");
      }
    }
  }

  // nullptr when absent.
  static const json* find(const json& obj, const std::string& key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  const json& require(const json& obj, const std::string& path, const std::string& key,
                      const std::string& what) const {
    const json* v = find(obj, key);
    if (!v) fail(child(path, key), "missing (expected " + what + ")");
    return *v;
  }

  std::string string_value(const json& v, const std::string& path, bool non_empty) const {
    const char* what = non_empty ? "a non-empty string" : "a string";
    if (!v.is_string()) fail(path, std::string("expected ") + what + ", got " + describe(v));
    std::string s = v.get<std::string>();
    if (non_empty && s.find_first_not_of(" \t\r\n") == std::string::npos)
      fail(path, std::string("expected ") + what + ", got an empty string");
    return s;
  }

  std::string required_string(const json& obj, const std::string& path, const std::string& key) const {
    return string_value(require(obj, path, key, "a non-empty string"), child(path, key), true);
  }

  std::string optional_string(const json& obj, const std::string& path, const std::string& key) const {
    const json* v = find(obj, key);
    return v ? string_value(*v, child(path, key), false) : std::string();
  }

  bool required_bool(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = require(obj, path, key, "a boolean (true or false)");
    if (!v.is_boolean()) fail(child(path, key), "expected a boolean (true or false), got " + describe(v));
    return v.get<bool>();
  }

  // A boolean, plain or annotated ({"value": true, "assumption": ...}).
  bool required_annotated_bool(const json& obj, const std::string& path, const std::string& key) const {
    const std::string what = "a boolean (true or false)";
    const json* v = &require(obj, path, key, what);
    std::string vpath = child(path, key);
    if (v->is_object()) {
      v = &annotated(*v, vpath, what);
      vpath = child(vpath, "value");
    }
    if (!v->is_boolean()) fail(vpath, "expected " + what + ", got " + describe(*v));
    return v->get<bool>();
  }

  // Returns the index into `allowed`; `dflt` < 0: required.
  int enum_value(const json& obj, const std::string& path, const std::string& key,
                 std::initializer_list<const char*> allowed, int dflt) const {
    return enum_index(obj, path, key, std::vector<std::string>(allowed.begin(), allowed.end()), dflt);
  }
  int enum_value(const json& obj, const std::string& path, const std::string& key,
                 const std::vector<std::string>& allowed, int dflt) const {
    return enum_index(obj, path, key, allowed, dflt);
  }

  // One of an enum's `choices`, by its name: to_string(choice), the enum's one name table. Without
  // `dflt` the key is required.
  template <typename E>
  E choice(const json& obj, const std::string& path, const std::string& key, const std::vector<E>& choices,
           std::optional<E> dflt = std::nullopt) const {
    std::vector<std::string> names;
    int d = -1;
    for (size_t i = 0; i < choices.size(); ++i) {
      names.push_back(to_string(choices[i]));
      if (dflt && choices[i] == *dflt) d = static_cast<int>(i);
    }
    return choices[static_cast<size_t>(enum_index(obj, path, key, names, d))];
  }

 private:
  int enum_index(const json& obj, const std::string& path, const std::string& key,
                 const std::vector<std::string>& allowed, int dflt) const {
    auto what = [&allowed] {  // the accepted words, written only for a message (a sweep reads many plans)
      std::vector<std::string> q;
      for (const std::string& a : allowed) q.push_back(quoted(a));
      return "one of " + join(q, ", ");
    };
    const json* v = find(obj, key);
    if (!v) {
      if (dflt >= 0) return dflt;
      fail(child(path, key), "missing (expected " + what() + ")");
    }
    std::string vpath = child(path, key);
    if (v->is_object()) {  // an annotated choice
      v = &annotated(*v, vpath, what());
      vpath = child(vpath, "value");
    }
    if (!v->is_string()) fail(vpath, "expected " + what() + ", got " + describe(*v));
    const std::string& s = v->get_ref<const std::string&>();
    for (size_t i = 0; i < allowed.size(); ++i)
      if (s == allowed[i]) return static_cast<int>(i);
    fail(vpath, "expected " + what() + ", got " + quoted(s));
  }

 public:
  // A plain number or an annotated value object.
  double number(const json& v, const std::string& path, NumKind kind) const {
    if (!v.is_object()) return plain_number(v, path, kind);
    const json& value = annotated(v, path, num_desc(kind));
    return plain_number(value, child(path, "value"), kind);
  }

  // An annotated value object: {"value": ..., "assumption": reason} or {"value": ..., "source": ...,
  // "fitted_on": case}. Checks its keys, records the annotation and returns the value (not yet
  // checked against `expected`, which the caller does).
  const json& annotated(const json& v, const std::string& path, const std::string& expected) const {
    check_keys(v, path, {"value", "assumption", "source", "fitted_on"});
    const json* value = find(v, "value");
    if (!value) fail(child(path, "value"), "missing (expected " + expected + ")");
    const json* assumption = find(v, "assumption");
    const json* source = find(v, "source");
    const json* fitted_on = find(v, "fitted_on");
    if (assumption && source)
      fail(path, "expected either \"assumption\" or \"source\" in an annotated value, not both");
    if (!assumption && !source)
      fail(path,
           "expected an annotated value to carry an \"assumption\" (a reason) or a \"source\" "
           "(a free parameter's source)");
    Annotation a;
    a.json_path = ann_prefix_ + path;
    a.value = *value;
    if (assumption) {
      if (fitted_on)
        fail(child(path, "fitted_on"),
             "unknown key (\"fitted_on\" goes only with \"source\"; expected one of: value, assumption)");
      a.kind = "assumption";
      a.reason = string_value(*assumption, child(path, "assumption"), true);
    } else {
      a.kind = "free_parameter";
      a.reason = string_value(*source, child(path, "source"), true);
      if (fitted_on) a.fitted_on = string_value(*fitted_on, child(path, "fitted_on"), false);
    }
    annotations_->push_back(std::move(a));
    return *value;
  }

  // A number checked against a physical range (sim/physical_range.hpp), the range in the message.
  double ranged(const json& v, const std::string& path, const PhysicalRange& range) const {
    const double x = number(v, path, range.zero_allowed ? NumKind::non_negative : NumKind::positive);
    if (!range.contains(x)) {
      const std::string at = v.is_object() ? child(path, "value") : path;
      fail(at, "expected " + range.describe() + ", got " + (v.is_object() ? v.at("value") : v).dump());
    }
    return x;
  }

  double required_ranged(const json& obj, const std::string& path, const std::string& key,
                         const PhysicalRange& range) const {
    return ranged(require(obj, path, key, range.describe()), child(path, key), range);
  }

  int integer(const json& v, const std::string& path) const {
    return static_cast<int>(number(v, path, NumKind::positive_int));
  }

  double required_number(const json& obj, const std::string& path, const std::string& key, NumKind kind) const {
    return number(require(obj, path, key, num_desc(kind)), child(path, key), kind);
  }

  int required_int(const json& obj, const std::string& path, const std::string& key) const {
    return integer(require(obj, path, key, num_desc(NumKind::positive_int)), child(path, key));
  }

  int optional_int(const json& obj, const std::string& path, const std::string& key, int dflt) const {
    const json* v = find(obj, key);
    return v ? integer(*v, child(path, key)) : dflt;
  }

 private:
  double plain_number(const json& v, const std::string& path, NumKind kind) const {
    const std::string expected = std::string("expected ") + num_desc(kind);
    if (!v.is_number()) fail(path, expected + ", got " + describe(v));
    const double x = v.get<double>();
    if (!std::isfinite(x)) fail(path, expected + ", got " + v.dump());
    switch (kind) {
      case NumKind::positive_int:
        if (v.is_number_float() && std::floor(x) != x) fail(path, expected + ", got " + v.dump());
        if (x <= 0) fail(path, expected + ", got " + v.dump());
        if (x > static_cast<double>(INT_MAX))
          fail(path, expected + " no larger than " + std::to_string(INT_MAX) + ", got " + v.dump());
        break;
      case NumKind::positive:
        if (!(x > 0)) fail(path, expected + ", got " + v.dump());
        break;
      case NumKind::non_negative:
        if (!(x >= 0)) fail(path, expected + ", got " + v.dump());
        break;
      case NumKind::fraction:
        if (!(x > 0 && x <= 1)) fail(path, expected + ", got " + v.dump());
        break;
    }
    return x;
  }

  std::string file_, ann_prefix_;
  std::vector<Annotation>* annotations_;
};

const Precision kPrecisions[] = {Precision::fp64, Precision::fp32, Precision::fp16, Precision::fp8};

// range: checks each value against a physical range instead of `kind` alone. fp32_required: peaks
// and GEMM efficiencies need fp32; FlashAttention's efficiency only the precisions it runs in (fp16, bf16).
std::map<Precision, double> read_precision_map(const Reader& r, const json& obj, const std::string& path,
                                               const std::string& key, NumKind kind,
                                               const PhysicalRange* range = nullptr, bool fp32_required = true) {
  const std::string p = child(path, key);
  const std::string what = std::string("an object with keys fp64, fp32, fp16, fp8") + (fp32_required ? " (fp32 required)" : "");
  const json& m = r.require(obj, path, key, what);
  r.require_object(m, p, what);
  r.check_keys(m, p, {"fp64", "fp32", "fp16", "fp8"});
  auto read = [&](const json& v, const std::string& vp) { return range ? r.ranged(v, vp, *range) : r.number(v, vp, kind); };
  std::map<Precision, double> out;
  if (fp32_required) out[Precision::fp32] = read(r.require(m, p, "fp32", num_desc(kind)), child(p, "fp32"));
  for (Precision pr : kPrecisions) {
    if (pr == Precision::fp32 && fp32_required) continue;
    if (const json* v = Reader::find(m, to_string(pr))) out[pr] = read(*v, child(p, to_string(pr)));
  }
  return out;
}

// An embedded data file by name ("sunway-oceanlight" in topologies/machines/), parsed; fails
// at `path` with the known names when there is none.
std::pair<std::string, json> embedded_json(const Reader& r, const json& ref, const std::string& path,
                                           const std::string& dir, const std::string& what) {
  const std::vector<std::string> names = embedded_names(dir);
  std::vector<std::string> quoted_names;
  for (const auto& n : names) quoted_names.push_back(quoted(n));
  const std::string choices = names.empty() ? std::string("none are embedded in this build")
                                            : "embedded under " + dir + ": " + join(quoted_names, ", ");
  if (!ref.is_string())
    r.fail(path, "expected a " + what + " name (" + choices + ") or an inline " + what + " object, got " + describe(ref));
  const std::string name = ref.get<std::string>();
  const std::string rel = dir + name + kMachineExt;
  const auto& files = embedded_files();
  auto it = files.find(rel);
  if (it == files.end() || name.empty() || name.find('/') != std::string::npos)
    r.fail(path, "expected the name of a known " + what + " (" + choices + ") or an inline " + what + " object, got " +
                     quoted(name));
  const std::string label = "<embedded>/" + rel;
  return {label, parse_json(it->second, label)};
}

void read_sources(const Reader& r, const json& obj, const std::string& path) {
  if (const json* src = Reader::find(obj, "sources")) {
    const std::string p = child(path, "sources");
    r.require_object(*src, p, "an object of citations (key -> string)");
    for (const auto& item : src->items()) r.string_value(item.value(), child(p, item.key()), false);
  }
}

// The device's compiler: {"name", "fuses_elementwise", "convolution": "im2col" | "implicit_gemm" |
// "window_taps"}.
void read_compiler(const Reader& r, const json& d, const std::string& path, MachineSpec& s) {
  const json* c = Reader::find(d, "compiler");
  if (!c) return;
  const std::string p = child(path, "compiler");
  r.require_object(*c, p, "a compiler object {name, fuses_elementwise, convolution[, vector_ops_per_random_word]}");
  r.check_keys(*c, p, {"name", "fuses_elementwise", "convolution", "vector_ops_per_random_word"});
  s.compiler_name = r.required_string(*c, p, "name");
  s.fuses_elementwise = r.required_annotated_bool(*c, p, "fuses_elementwise");
  const int convolution = r.enum_value(*c, p, "convolution", {"im2col", "implicit_gemm", "window_taps"}, -1);
  s.implicit_gemm_convolution = convolution >= 1;
  s.window_tap_convolution = convolution == 2;
  if (Reader::find(*c, "vector_ops_per_random_word")) {
    if (!(s.vector_unit_ops_per_s > 0))
      r.fail(child(p, "vector_ops_per_random_word"), "expected beside a device vector_unit_ops_per_s (the rate the words' operations run at)");
    s.vector_ops_per_random_word = r.required_ranged(*c, p, "vector_ops_per_random_word", kRandomWordOpsRange);
  }
}

// The device's systolic matrix unit: {"rows", "columns"} (a TPU v3 MXU: 128 x 128).
void read_matrix_unit(const Reader& r, const json& d, const std::string& path, MachineSpec& s) {
  const json* u = Reader::find(d, "matrix_unit");
  if (!u) return;
  const std::string p = child(path, "matrix_unit");
  r.require_object(*u, p, "a matrix unit object {rows, columns}");
  r.check_keys(*u, p, {"rows", "columns"});
  s.matrix_unit_rows = r.required_int(*u, p, "rows");
  s.matrix_unit_columns = r.required_int(*u, p, "columns");
}

// How the device tiles arrays in memory: {"sublanes", "lanes"} (a TPU: 8 x 128).
void read_memory_tile(const Reader& r, const json& d, const std::string& path, MachineSpec& s) {
  const json* t = Reader::find(d, "memory_tile");
  if (!t) return;
  const std::string p = child(path, "memory_tile");
  r.require_object(*t, p, "a memory tile object {sublanes, lanes}");
  r.check_keys(*t, p, {"sublanes", "lanes"});
  s.memory_tile_sublanes = r.required_int(*t, p, "sublanes");
  s.memory_tile_lanes = r.required_int(*t, p, "lanes");
}

// The device's own measured kernel profile ("kernel_profile": an embedded profile's name). Its class
// peaks are the device's best cases: the file's GEMM efficiencies and bandwidths must agree with
// them (a file that says one thing while its profile measured another is refused).
void read_kernel_profile(const Reader& r, const json& d, const std::string& path, MachineSpec& s) {
  if (!Reader::find(d, "kernel_profile")) return;
  const std::string p = child(path, "kernel_profile");
  s.kernel_profile = r.required_string(d, path, "kernel_profile");
  if (s.half_gemm_ridge_scaled)
    r.fail(p, "expected no kernel_profile beside half_gemm_ridge_scaled: a measured profile holds the 16-bit GEMMs "
              "themselves, not a host's 32-bit surface to rescale");
  std::shared_ptr<const HostProfile> prof;
  try {
    prof = load_embedded_profile(s.kernel_profile);
  } catch (const ProfileError& e) {
    r.fail(p, std::string("expected the name of an embedded kernel profile: ") + e.what());
  }
  auto agree = [&](double file_value, double measured, const std::string& key, const std::string& what) {
    if (std::abs(file_value / measured - 1) > 0.01)
      r.fail(child(path, key), fmt::format("expected {:.5g} (the kernel profile's measured {}, within 1 %), got {:.5g}",
                                           measured, what, file_value));
  };
  for (const auto& [prec, eff] : s.flash_attention_efficiency)
    if (!prof->peaks.count({KernelClass::fused_attention, prec}))
      r.fail(child(path, "flash_attention_efficiency"),
             fmt::format("expected no {} entry: the kernel profile has no fused attention measured at it", to_string(prec)));
  for (const auto& [key, peak] : prof->peaks) {
    const auto [cls, prec] = key;
    if (cls == KernelClass::gemm) {
      auto e = s.gemm_efficiency.find(prec), f = s.peak_flops_per_s.find(prec);
      if (e == s.gemm_efficiency.end() || f == s.peak_flops_per_s.end())
        r.fail(child(path, "gemm_efficiency"), fmt::format("expected an entry for {} (the kernel profile measured it)",
                                                          to_string(prec)));
      agree(e->second * f->second, peak, "gemm_efficiency/" + std::string(to_string(prec)),
            fmt::format("{} GEMM peak over the file's peak_flops_per_s", to_string(prec)));
    } else if (cls == KernelClass::memory_bound && prec == Precision::fp32) {
      agree(s.memory_bandwidth_Bps, peak, "memory_bandwidth_Bps", "fp32 memory-bound peak");
    } else if (cls == KernelClass::fused_attention) {
      auto e = s.flash_attention_efficiency.find(prec), f = s.peak_flops_per_s.find(prec);
      if (e == s.flash_attention_efficiency.end() || f == s.peak_flops_per_s.end())
        r.fail(child(path, "flash_attention_efficiency"),
               fmt::format("expected an entry for {} (the kernel profile measured it)", to_string(prec)));
      agree(e->second * f->second, peak, "flash_attention_efficiency/" + std::string(to_string(prec)),
            fmt::format("{} fused attention peak over the file's peak_flops_per_s", to_string(prec)));
    } else if (cls == KernelClass::optimizer_update) {
      agree(s.optimizer_memory_bandwidth_Bps, peak, "optimizer_memory_bandwidth_Bps", "optimizer update peak");
    }
  }
}

// One of the device's published fused attention kernels: {source, head_dim, seq, and a rate list per
// pass and mask}, each list one flop/s a sequence length (ascending); a list plain or annotated whole.
AttentionKernelTable read_attention_kernel(const Reader& r, const json& t, const std::string& p, const std::string& name) {
  r.require_object(t, p, "an attention kernel's rates {source, head_dim, seq, forward_flops_per_s, ...}");
  r.check_keys(t, p, {"source", "head_dim", "seq", "forward_flops_per_s", "forward_causal_flops_per_s",
                      "backward_flops_per_s", "backward_causal_flops_per_s"});
  r.required_string(t, p, "source");
  AttentionKernelTable k;
  k.name = name;
  k.head_dim = r.required_int(t, p, "head_dim");
  const auto list = [&](const std::string& key) {
    std::string lp = child(p, key);
    const json* l = &r.require(t, p, key, "an array of numbers, one a sequence length");
    if (l->is_object()) {  // the whole list annotated
      l = &r.annotated(*l, lp, "an array of numbers, one a sequence length");
      lp = child(lp, "value");
    }
    const json& a = *l;
    if (!a.is_array() || a.empty()) r.fail(lp, "expected a non-empty array, got " + describe(a));
    std::vector<double> v;
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string ip = child(lp, std::to_string(i));
      v.push_back(key == "seq" ? r.number(a[i], ip, NumKind::positive_int) : r.ranged(a[i], ip, kDeviceFlopRateRange));
      if (key == "seq" && i > 0 && !(v[i] > v[i - 1])) r.fail(ip, "expected sequence lengths in ascending order");
      if (key != "seq" && i >= k.seq.size()) r.fail(lp, fmt::format("expected {} rates, one a sequence length", k.seq.size()));
    }
    if (key != "seq" && v.size() != k.seq.size())
      r.fail(lp, fmt::format("expected {} rates, one a sequence length, got {}", k.seq.size(), v.size()));
    return v;
  };
  k.seq = list("seq");
  k.forward_flops_per_s = list("forward_flops_per_s");
  k.forward_causal_flops_per_s = list("forward_causal_flops_per_s");
  k.backward_flops_per_s = list("backward_flops_per_s");
  k.backward_causal_flops_per_s = list("backward_causal_flops_per_s");
  return k;
}

// "flash_attention_kernels": name -> the published rates of a fused attention kernel on the device.
void read_attention_kernels(const Reader& r, const json& d, const std::string& path, MachineSpec& s) {
  const json* k = Reader::find(d, "flash_attention_kernels");
  if (!k) return;
  const std::string p = child(path, "flash_attention_kernels");
  r.require_object(*k, p, "an object of attention kernels (name -> rates)");
  if (k->empty()) r.fail(p, "expected at least one attention kernel");
  for (const auto& item : k->items())
    s.attention_kernels[item.key()] = read_attention_kernel(r, item.value(), child(p, item.key()), item.key());
}

// A device: one node's compute and memory (topologies/devices/*.json).
void read_device_object(const Reader& r, const json& d, const std::string& path, MachineSpec& s) {
  r.require_object(d, path, "a device object");
  r.check_keys(d, path,
               {"name", "description", "peak_flops_per_s", "gemm_efficiency", "flash_attention_efficiency",
                 "half_gemm_ridge_scaled", "memory_bandwidth_Bps", "optimizer_memory_bandwidth_Bps", "memory_bytes",
                 "cores_per_device", "compiler", "streaming_multiprocessors", "special_function_ops_per_s", "vector_unit_ops_per_s", "matrix_unit",
                 "memory_tile", "kernel_profile", "flash_attention_kernels", "sources"});
  s.device_name = r.required_string(d, path, "name");
  r.optional_string(d, path, "description");
  s.peak_flops_per_s = read_precision_map(r, d, path, "peak_flops_per_s", NumKind::positive, &kDeviceFlopRateRange);
  s.gemm_efficiency = read_precision_map(r, d, path, "gemm_efficiency", NumKind::fraction);
  if (Reader::find(d, "flash_attention_efficiency"))
    s.flash_attention_efficiency =
        read_precision_map(r, d, path, "flash_attention_efficiency", NumKind::fraction, nullptr, false);
  if (Reader::find(d, "half_gemm_ridge_scaled"))
    s.half_gemm_ridge_scaled = r.required_annotated_bool(d, path, "half_gemm_ridge_scaled");
  s.memory_bandwidth_Bps = r.required_ranged(d, path, "memory_bandwidth_Bps", kDeviceBandwidthRange);
  s.optimizer_memory_bandwidth_Bps = r.required_ranged(d, path, "optimizer_memory_bandwidth_Bps", kDeviceBandwidthRange);
  s.memory_bytes = r.required_ranged(d, path, "memory_bytes", kDeviceMemoryRange);
  s.cores_per_device = r.optional_int(d, path, "cores_per_device", 1);
  s.streaming_multiprocessors = r.optional_int(d, path, "streaming_multiprocessors", 0);
  if (Reader::find(d, "special_function_ops_per_s"))
    s.special_function_ops_per_s = r.required_ranged(d, path, "special_function_ops_per_s", kDeviceFlopRateRange);
  if (Reader::find(d, "vector_unit_ops_per_s"))
    s.vector_unit_ops_per_s = r.required_ranged(d, path, "vector_unit_ops_per_s", kDeviceFlopRateRange);
  read_compiler(r, d, path, s);
  read_matrix_unit(r, d, path, s);
  read_memory_tile(r, d, path, s);
  read_kernel_profile(r, d, path, s);
  read_attention_kernels(r, d, path, s);
  read_sources(r, d, path);
}

void read_device(const Reader& r, const json& m, const std::string& path, MachineSpec& s) {
  const std::string dpath = child(path, "device");
  const json& d = r.require(m, path, "device", "a device name or a device object");
  if (d.is_object()) return read_device_object(r, d, dpath, s);
  const auto [label, doc] = embedded_json(r, d, dpath, kDeviceDir, "device");
  read_device_object(r.nested(label, dpath), doc, "", s);
}

// checkpoint_write_Bps is used only by scenarios with a "resilience" block (read_resilience), but
// checked in every machine file that gives it, so that a bad value is never silently accepted.
// (Its annotation is recorded only where it is used: the check records into a scratch list.)
void check_checkpoint_write_Bps(const Reader& r, const json& m, const std::string& path) {
  if (!Reader::find(m, "checkpoint_write_Bps")) return;
  std::vector<Annotation> unrecorded;
  Reader(r.file(), "", &unrecorded).required_ranged(m, path, "checkpoint_write_Bps", kSharedLinkBandwidthRange);
}

// A machine family's view of the Reader (topologies/machine_reader.hpp): the family's reader,
// beside its network in topologies/, reads its keys through it.
class FamilyReader final : public MachineReader {
 public:
  explicit FamilyReader(const Reader& r) : r_(r) {}
  [[noreturn]] void fail(const std::string& path, const std::string& expected) const override { r_.fail(path, expected); }
  void check_keys(const json& obj, const std::string& path, std::initializer_list<const char*> allowed) const override {
    r_.check_keys(obj, path, allowed);
  }
  const json& require(const json& obj, const std::string& path, const std::string& key,
                      const std::string& what) const override {
    return r_.require(obj, path, key, what);
  }
  void require_object(const json& v, const std::string& path, const std::string& what) const override {
    r_.require_object(v, path, what);
  }
  int required_int(const json& obj, const std::string& path, const std::string& key) const override {
    return r_.required_int(obj, path, key);
  }
  int optional_int(const json& obj, const std::string& path, const std::string& key, int dflt) const override {
    return r_.optional_int(obj, path, key, dflt);
  }
  bool required_annotated_bool(const json& obj, const std::string& path, const std::string& key) const override {
    return r_.required_annotated_bool(obj, path, key);
  }
  double required_positive(const json& obj, const std::string& path, const std::string& key) const override {
    return r_.required_number(obj, path, key, NumKind::positive);
  }
  double required_fraction(const json& obj, const std::string& path, const std::string& key) const override {
    return r_.required_number(obj, path, key, NumKind::fraction);
  }
  double required_ranged(const json& obj, const std::string& path, const std::string& key,
                         const PhysicalRange& range) const override {
    return r_.required_ranged(obj, path, key, range);
  }
  void read_device(const json& m, const std::string& path, MachineSpec& s) const override {
    exasim::read_device(r_, m, path, s);
  }
  void check_checkpoint_write_Bps(const json& m, const std::string& path) const override {
    exasim::check_checkpoint_write_Bps(r_, m, path);
  }
  void read_named_file(const json& ref, const std::string& path, const std::string& dir, const std::string& what,
                       const std::function<void(const MachineReader&, const json&, const std::string&)>& read)
      const override {
    if (ref.is_object()) return read(*this, ref, path);
    const auto [label, doc] = embedded_json(r_, ref, path, dir, what);
    const Reader nested = r_.nested(label, path);
    read(FamilyReader(nested), doc, "");
  }
  double ranged_value(const json& v, const std::string& path, const PhysicalRange& range) const override {
    return r_.ranged(v, path, range);
  }

 private:
  const Reader& r_;
};

// Ranks are numbered in 32 bits: a machine of more devices is refused (no product wraps around).
void check_device_count(const Reader& r, const std::string& path, const MachineFamily& family, const MachineSpec& s) {
  const long long n = s.device_count();
  if (n <= INT_MAX) return;
  r.fail(child(path, family.count_key), "expected at most " + std::to_string(INT_MAX) +
                                            " devices in the machine (ranks are 32-bit), got " +
                                            family.device_product(s) + " = " + std::to_string(n));
}

// The family (topologies/machine_families.hpp) reads its own keys; name, description and sources here.
MachineSpec read_machine_object(const Reader& r, const json& m, const std::string& path) {
  r.require_object(m, path, "a machine object");
  const std::vector<MachineFamily>& families = machine_families();
  std::vector<std::string> names;
  for (const MachineFamily& f : families) names.push_back(f.name);
  const MachineFamily& family = families[static_cast<size_t>(r.enum_value(m, path, "family", names, -1))];
  MachineSpec s;
  s.family = family.name;
  family.read(FamilyReader(r), m, path, s);
  check_device_count(r, path, family, s);
  s.name = r.required_string(m, path, "name");
  r.optional_string(m, path, "description");
  read_sources(r, m, path);
  return s;
}

// An embedded machine, read once per process and name: its file, the family's nested files (device,
// NCCL tuning) and their checks are the same every time, and a sweep parses one scenario per plan.
// The memo keeps the machine and the annotations its reading recorded (replayed in order); a
// machine that fails is read again each time, so its error names the scenario that asked for it.
struct ReadMachine {
  MachineSpec spec;
  std::vector<Annotation> annotations;
};

MachineSpec read_embedded_machine(const Reader& r, const json& m, const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, ReadMachine> memo;
  const std::string key = r.ann_prefix() + "\n" + m.get<std::string>();
  const auto replay = [&](const ReadMachine& rm) {
    if (r.annotations()) r.annotations()->insert(r.annotations()->end(), rm.annotations.begin(), rm.annotations.end());
    return rm.spec;
  };
  {
    const std::lock_guard<std::mutex> lock(mu);
    if (auto it = memo.find(key); it != memo.end()) return replay(it->second);
  }
  ReadMachine rm;
  const Reader scratch(r.file(), r.ann_prefix(), &rm.annotations);
  const auto [label, doc] = embedded_json(scratch, m, path, kMachineDir, "machine");
  rm.spec = read_machine_object(scratch.nested(label, path), doc, "");
  const std::lock_guard<std::mutex> lock(mu);
  return replay(memo.emplace(key, std::move(rm)).first->second);
}

MachineSpec read_machine(const Reader& r, const json& root) {
  const std::string path = "/machine";
  const json& m = r.require(root, "", "machine", "a machine name or a machine object");
  if (m.is_object()) return read_machine_object(r, m, path);
  if (m.is_string()) return read_embedded_machine(r, m, path);
  const auto [label, doc] = embedded_json(r, m, path, kMachineDir, "machine");  // refuses it
  return read_machine_object(r.nested(label, path), doc, "");
}

// The keys of a convolutional network's model object ("family": "resnet"), and of a transformer's.
const std::vector<std::string> kConvNetKeys = {"stages", "block", "base_width", "image_size", "classes"};
const std::vector<std::string> kTransformerKeys = {"layers", "d_model", "heads", "d_ff", "experts_per_layer",
                                                   "top_k", "capacity_factor", "router", "vocab", "architecture",
                                                   "decoder_layers", "moe_every", "masked_fraction", "next_sentence",
                                                   "group_size", "capacity_rule", "embedding_lookup"};

ModelSpec read_convnet_model(const Reader& r, const json& m, const std::string& path) {
  for (const std::string& k : kTransformerKeys)
    if (Reader::find(m, k))
      r.fail(child(path, k), "a transformer key in a convolutional network (\"family\": \"resnet\"; expected one "
                             "of: name, family, stages, block, base_width, image_size, classes)");
  r.check_keys(m, path, {"name", "family", "stages", "block", "base_width", "image_size", "classes"});
  r.enum_value(m, path, "family", {"resnet"}, -1);
  ModelSpec s;
  s.name = r.required_string(m, path, "name");
  const std::string sp = child(path, "stages");
  const json& st = r.require(m, path, "stages", "a list of blocks per stage, e.g. [3, 4, 6, 3]");
  if (!st.is_array() || st.empty())
    r.fail(sp, "expected a non-empty list of blocks per stage (positive integers, e.g. [3, 4, 6, 3]), got " + describe(st));
  for (size_t i = 0; i < st.size(); ++i) s.convnet.stage_blocks.push_back(r.integer(st[i], sp + "/" + std::to_string(i)));
  s.convnet.block = r.choice(m, path, "block", {ResidualBlock::bottleneck, ResidualBlock::basic},
                             std::optional(ResidualBlock::bottleneck));
  s.convnet.base_width = r.optional_int(m, path, "base_width", 64);
  s.convnet.image_size = r.optional_int(m, path, "image_size", 224);
  s.convnet.classes = r.optional_int(m, path, "classes", 1000);
  const long long down = 4LL << (s.convnet.stage_blocks.size() - 1);  // stem (4) and a halving per later stage
  if (s.convnet.image_size < down)
    r.fail(child(path, "image_size"), "expected at least " + std::to_string(down) + " pixels: the stem and " +
                                          std::to_string(s.convnet.stage_blocks.size() - 1) +
                                          " down-sampling stages halve it to less than one");
  return s;
}

// The transformer family (models/moe_spec.hpp): architecture, decoder_layers, moe_every and BERT's
// heads, each refused where it has no meaning.
void read_family(const Reader& r, const json& m, const std::string& path, ModelSpec& s) {
  using A = ModelSpec::Architecture;
  s.architecture =
      r.choice(m, path, "architecture", {A::decoder, A::encoder, A::encoder_decoder}, std::optional(A::decoder));
  const bool enc_dec = s.architecture == A::encoder_decoder, encoder = s.architecture == A::encoder;
  if (Reader::find(m, "decoder_layers") && !enc_dec)
    r.fail(child(path, "decoder_layers"), "expected no decoder_layers: only \"architecture\": \"encoder_decoder\" has them");
  if (enc_dec) s.decoder_layers = r.required_int(m, path, "decoder_layers");
  for (const char* k : {"masked_fraction", "next_sentence"})
    if (Reader::find(m, k) && !encoder)
      r.fail(child(path, k), std::string("expected no ") + k + ": BERT's heads belong to \"architecture\": \"encoder\"");
  if (const json* v = Reader::find(m, "masked_fraction")) {
    s.masked_fraction = r.number(*v, child(path, "masked_fraction"), NumKind::fraction);
    if (!(s.masked_fraction > 0)) r.fail(child(path, "masked_fraction"), "expected a fraction above 0 (BERT: 0.15)");
  }
  if (Reader::find(m, "next_sentence")) s.next_sentence = r.required_annotated_bool(m, path, "next_sentence");
  if (Reader::find(m, "moe_every")) {
    const std::string mp = child(path, "moe_every");
    s.moe_every = r.optional_int(m, path, "moe_every", 1);
    if (!Reader::find(m, "experts_per_layer"))
      r.fail(mp, "expected no moe_every: a dense model (no experts_per_layer) has no MoE layers");
    if (s.layers % s.moe_every != 0 || s.decoder_layers % s.moe_every != 0)
      r.fail(mp, "expected a divisor of the layers (" + std::to_string(s.layers) +
                     (enc_dec ? ") and of decoder_layers (" + std::to_string(s.decoder_layers) : std::string()) +
                     "): every moe_every-th layer is an MoE layer, got " + std::to_string(s.moe_every));
  }
}

ModelSpec read_model(const Reader& r, const json& root) {
  const std::string path = "/model";
  const json& m = r.require(root, "", "model", "a model object");
  r.require_object(m, path, "a model object");
  if (Reader::find(m, "family")) return read_convnet_model(r, m, path);
  for (const std::string& k : kConvNetKeys)
    if (Reader::find(m, k))
      r.fail(child(path, k), "a convolutional-network key in a transformer model (a convolutional network says "
                             "\"family\": \"resnet\"; a transformer takes: name, layers, d_model, heads, d_ff, "
                             "experts_per_layer, top_k, capacity_factor, router, vocab)");
  r.check_keys(m, path, {"name", "layers", "d_model", "heads", "d_ff", "experts_per_layer", "top_k", "capacity_factor", "router",
                        "vocab", "kv_heads", "ffn", "tied_embeddings", "architecture", "decoder_layers", "moe_every",
                        "masked_fraction", "next_sentence", "dropout", "group_size", "capacity_rule",
                        "embedding_lookup"});
  ModelSpec s;
  s.name = r.required_string(m, path, "name");
  s.layers = r.required_int(m, path, "layers");
  s.d_model = r.required_int(m, path, "d_model");
  s.heads = r.required_int(m, path, "heads");
  s.d_ff = r.required_int(m, path, "d_ff");
  s.experts_per_layer = r.optional_int(m, path, "experts_per_layer", 0);
  s.top_k = r.optional_int(m, path, "top_k", 1);
  if (const json* v = Reader::find(m, "capacity_factor"))
    s.capacity_factor = r.number(*v, child(path, "capacity_factor"), NumKind::non_negative);  // 0: dropless
  if (Reader::find(m, "group_size")) {
    if (s.dense())
      r.fail(child(path, "group_size"), "expected no group_size: a dense model (no experts_per_layer) routes no tokens");
    s.group_size = r.optional_int(m, path, "group_size", 0);
  }
  if (Reader::find(m, "capacity_rule")) {
    if (!Reader::find(m, "group_size"))
      r.fail(child(path, "capacity_rule"), "expected no capacity_rule without group_size: the rule sizes the expert "
                                           "capacity of GShard's groups");
    using CR = ModelSpec::CapacityRule;
    s.capacity_rule = r.choice(m, path, "capacity_rule", {CR::ceil, CR::lingvo}, std::optional(CR::ceil));
  }
  s.vocab = r.optional_int(m, path, "vocab", 0);
  if (Reader::find(m, "embedding_lookup")) {
    if (s.vocab == 0)
      r.fail(child(path, "embedding_lookup"), "expected no embedding_lookup: a model without a vocab has no embedding");
    using EL = ModelSpec::EmbeddingLookup;
    s.embedding_lookup = r.choice(m, path, "embedding_lookup", {EL::gather, EL::one_hot_matmul}, std::optional(EL::gather));
  }
  s.kv_heads = r.optional_int(m, path, "kv_heads", 0);
  if (const json* v = Reader::find(m, "dropout")) {
    s.dropout = r.number(*v, child(path, "dropout"), NumKind::non_negative);
    if (!(*s.dropout < 1)) r.fail(child(path, "dropout"), "expected a probability in [0, 1), got " + v->dump());
  }
  s.ffn = r.choice(m, path, "ffn", {ModelSpec::Ffn::gelu, ModelSpec::Ffn::swiglu}, std::optional(ModelSpec::Ffn::gelu));
  if (Reader::find(m, "tied_embeddings")) s.tied_embeddings = r.required_annotated_bool(m, path, "tied_embeddings");
  read_family(r, m, path, s);
  if (const json* v = Reader::find(m, "router")) {
    const std::string rp = child(path, "router");
    if (s.dense())
      r.fail(rp, "expected no router: a dense model (no experts_per_layer) routes no tokens");
    r.require_object(*v, rp, "a router object ({\"distribution\": \"uniform\"} or {\"distribution\": \"zipf\", "
                             "\"zipf_s\": 1.2})");
    r.check_keys(*v, rp, {"distribution", "zipf_s"});
    s.router.distribution = r.choice(*v, rp, "distribution", {RouterDistribution::uniform, RouterDistribution::zipf},
                                     std::optional(RouterDistribution::uniform));
    const json* zs = Reader::find(*v, "zipf_s");
    if (s.router.distribution == RouterDistribution::zipf) {
      if (!zs) r.fail(child(rp, "zipf_s"), "missing (expected a positive number, the Zipf exponent s: expert e receives "
                                           "a share proportional to 1 / (e + 1)^s)");
      s.router.zipf_s = r.number(*zs, child(rp, "zipf_s"), NumKind::positive);
    } else if (zs) {
      r.fail(child(rp, "zipf_s"), "unknown key (\"zipf_s\" goes only with \"distribution\": \"zipf\"; expected one "
                                  "of: distribution)");
    }
  }
  return s;
}

// general: a general plan's training object (the batch lives in the plan).
TrainingSpec read_training(const Reader& r, const json& root, bool general) {
  const std::string path = "/training";
  const json& t = r.require(root, "", "training", "a training object");
  r.require_object(t, path, "a training object");
  if (general)
    r.check_keys(t, path, {"seq_len", "precision", "grad_sync", "grad_clip", "optimizer", "attention_logits_precision"});
  else
    r.check_keys(t, path, {"seq_len", "micro_batch_per_node", "micro_batches", "precision", "grad_sync"});
  TrainingSpec s;
  s.seq_len = r.required_int(t, path, "seq_len");
  if (!general) {
    s.micro_batch_per_node = r.required_int(t, path, "micro_batch_per_node");
    s.micro_batches = r.optional_int(t, path, "micro_batches", 1);
  }
  // The MoDa layouts take the modes of models/precision.hpp ("mixed" is "layerwise", BaGuaLu's
  // layer-wise mixed precision); general plans fp32, fp16 (Megatron's mixed precision) and bf16.
  static const PrecisionPolicy general_modes[] = {PrecisionPolicy::fp32, PrecisionPolicy::mixed, PrecisionPolicy::fp16,
                                                  PrecisionPolicy::bf16, PrecisionPolicy::fp8,
                                                  PrecisionPolicy::bf16_matmul};
  static const PrecisionPolicy moda_modes[] = {PrecisionPolicy::fp32, PrecisionPolicy::mixed, PrecisionPolicy::mixed,
                                               PrecisionPolicy::apex_o1, PrecisionPolicy::apex_o2};
  s.precision = general ? general_modes[r.enum_value(t, path, "precision",
                                                        {"fp32", "mixed", "fp16", "bf16", "fp8", "bf16_matmul"}, -1)]
                        : moda_modes[r.enum_value(t, path, "precision",
                                                  {"fp32", "mixed", "layerwise", "apex_o1", "apex_o2"}, -1)];
  s.grad_sync = general ? r.choice(t, path, "grad_sync", {GradSync::after_backward, GradSync::overlap, GradSync::per_tensor},
                                   std::optional(GradSync::after_backward))
                        : r.choice(t, path, "grad_sync", {GradSync::after_backward, GradSync::overlap},
                                   std::optional(GradSync::after_backward));
  if (general)
    s.grad_clip = r.choice(t, path, "grad_clip", {GradClip::after_reduction, GradClip::before_reduction},
                           std::optional(GradClip::after_reduction));
  if (general)
    s.optimizer = r.choice(t, path, "optimizer", {Optimizer::adam, Optimizer::lamb, Optimizer::adafactor},
                           std::optional(Optimizer::adam));
  if (general && Reader::find(t, "attention_logits_precision")) {
    using AL = TrainingSpec::AttentionLogits;
    s.attention_logits = r.choice(t, path, "attention_logits_precision", {AL::activation, AL::fp32}, std::optional(AL::activation));
    const bool half = s.precision == PrecisionPolicy::fp16 || s.precision == PrecisionPolicy::bf16;
    if (s.attention_logits == AL::fp32 && !half)
      r.fail(child(path, "attention_logits_precision"),
             "expected \"activation\": fp32 logits change only 16-bit activations (precision \"fp16\" or \"bf16\")");
  }
  return s;
}

// A convolutional network's training object: the precision alone (images live in the plan).
TrainingSpec read_convnet_training(const Reader& r, const json& root) {
  const std::string path = "/training";
  const json& t = r.require(root, "", "training", "a training object");
  r.require_object(t, path, "a training object");
  r.check_keys(t, path, {"precision", "grad_sync"});
  TrainingSpec s;
  s.precision = r.enum_value(t, path, "precision", {"fp32", "fp16"}, -1) == 0 ? PrecisionPolicy::fp32 : PrecisionPolicy::fp16;
  s.grad_sync = r.choice(t, path, "grad_sync", {GradSync::after_backward, GradSync::per_tensor},
                         std::optional(GradSync::after_backward));
  return s;
}

// A convolutional network's plan: data-parallel replicas (devices), the global batch of images,
// weight-update sharding (MLPerf v0.6; zero_stage 1) and the distributed batch-norm group.
ParallelPlan read_convnet_plan(const Reader& r, const json& root) {
  const std::string path = "/plan";
  const json& p = r.require(root, "", "plan", "a plan object");
  r.require_object(p, path, "a plan object");
  r.check_keys(p, path, {"devices", "global_batch", "weight_update_sharding", "batch_norm_group", "batch_norm_tile",
                         "slice"});
  ParallelPlan s;
  s.data = r.required_int(p, path, "devices");
  s.global_batch = r.required_int(p, path, "global_batch");
  s.micro_batch = s.global_batch / s.data;  // models/plan_rules.cpp checks that devices divide it
  if (Reader::find(p, "weight_update_sharding"))
    s.zero_stage = r.required_annotated_bool(p, path, "weight_update_sharding") ? 1 : 0;
  s.batch_norm_group = r.optional_int(p, path, "batch_norm_group", 1);
  return s;
}

// "batch_norm_tile": [x, y] on a torus machine (after its slice): each batch-norm group is an x-by-y
// tile of chips (MLPerf v0.7's image_util.tile_group_assignment), in rows of the torus's x chips;
// batch_norm_group, when given, must be x y (models/plan_rules.cpp checks the rest).
void read_batch_norm_tile(const Reader& r, const json& root, Scenario& s) {
  const json* v = Reader::find(root.at("plan"), "batch_norm_tile");
  if (!v) return;
  std::string path = "/plan/batch_norm_tile";
  const MachineSpec& mc = s.machine;
  if (mc.family != "torus")
    r.fail(path, "expected no batch_norm_tile: machine " + quoted(mc.name) + " is not a torus (family " +
                     quoted(mc.family) + ")");
  const std::string expected = "[x, y], the tile's chips per row and rows";
  if (v->is_object()) {
    v = &r.annotated(*v, path, expected);
    path += "/value";
  }
  if (!v->is_array() || v->size() != 2) r.fail(path, "expected " + expected + ", got " + describe(*v));
  ParallelPlan& p = s.parallel;
  p.batch_norm_tile_x = r.integer((*v)[0], path + "/0");
  p.batch_norm_tile_y = r.integer((*v)[1], path + "/1");
  p.batch_norm_row_devices = mc.torus.x;
  const long long chips = static_cast<long long>(p.batch_norm_tile_x) * p.batch_norm_tile_y;
  if (chips > p.data)
    r.fail(path, "expected a tile of at most the plan's " + std::to_string(p.data) + " devices, got " +
                     std::to_string(p.batch_norm_tile_x) + " x " + std::to_string(p.batch_norm_tile_y));
  if (!Reader::find(root.at("plan"), "batch_norm_group")) p.batch_norm_group = static_cast<int>(chips);
}

// What the plan rules (models/plan_rules.hpp) need to know of the machine.
PlanMachine plan_machine(const MachineSpec& mc) {
  PlanMachine pm;
  pm.name = mc.name;
  pm.family = mc.family;
  pm.device_name = mc.device_name;
  pm.device_word = mc.device_word();
  pm.devices = mc.device_count();
  pm.fp16_peak = mc.peak_flops_per_s.count(Precision::fp16) > 0;
  pm.fp16_gemm = mc.gemm_efficiency.count(Precision::fp16) > 0;
  pm.fp8_peak = mc.peak_flops_per_s.count(Precision::fp8) > 0;
  pm.fp8_gemm = mc.gemm_efficiency.count(Precision::fp8) > 0;
  pm.flash_fp32 = mc.flash_attention_efficiency.count(Precision::fp32) > 0;
  pm.flash_fp16 = mc.flash_attention_efficiency.count(Precision::fp16) > 0;
  for (const auto& [name, k] : mc.attention_kernels) pm.attention_kernel_head_dims[name] = k.head_dim;
  pm.host_offload = mc.host_link_Bps > 0 && mc.host_memory_Bps > 0;
  pm.cores_per_device = mc.cores_per_device;
  pm.streaming_multiprocessors = mc.streaming_multiprocessors;
  pm.nodes_per_supernode = mc.nodes_per_supernode;
  pm.supernodes = mc.supernodes;
  return pm;
}

// The plan rules of models/plan_rules.hpp, the first broken one reported with its JSON path.
void check_plan_rules(const Reader& r, const Scenario& s) {
  const PlanMachine pm = plan_machine(s.machine);
  std::optional<PlanProblem> bad;
  if (s.model.is_convnet())
    bad = convnet_plan_problem(s.parallel, s.training.precision, &pm, pm.cores_per_device);
  else if (s.plan_kind == Scenario::PlanKind::general)
    bad = general_plan_problem(s.model, s.training, s.parallel, &pm);
  else
    bad = moda_plan_problem(s.model, s.training, s.plan, pm);
  if (bad) r.fail(bad->json_path, bad->expected);
}

PlanSpec read_plan(const Reader& r, const json& root) {
  const std::string path = "/plan";
  const json& p = r.require(root, "", "plan", "a plan object");
  r.require_object(p, path, "a plan object");
  r.check_keys(p, path, {"layout", "nodes", "nodes_per_supernode_used", "paro", "all_to_all"});
  PlanSpec s;
  s.layout = r.choice<Layout>(p, path, "layout", {Layout::moda, Layout::inverse});
  s.nodes = r.required_int(p, path, "nodes");
  s.nodes_per_supernode_used = r.required_int(p, path, "nodes_per_supernode_used");
  s.paro = r.required_bool(p, path, "paro");
  s.all_to_all = r.choice(p, path, "all_to_all",
                          {CollectiveAlgorithm::pairwise, CollectiveAlgorithm::direct, CollectiveAlgorithm::hierarchical},
                          std::optional(CollectiveAlgorithm::pairwise));
  return s;
}

// plan.placement: "tensor", "data" and "pipeline" once each, innermost first, and optionally
// "expert" (beside "data") and "context".
std::vector<ParallelDim> read_placement(const Reader& r, const json& list, const std::string& pp) {
  const json* pl = &list;
  std::vector<ParallelDim> placement;
  const std::string what =
      "a list of \"tensor\", \"data\" and \"pipeline\", each once, innermost first (and optionally \"expert\" "
      "beside \"data\", and \"context\")";
  if (!pl->is_array() || pl->size() < 3 || pl->size() > 5) r.fail(pp, "expected " + what + ", got " + describe(*pl));
  bool seen[5] = {false, false, false, false, false};
  for (size_t i = 0; i < pl->size(); ++i) {
    const json& e = (*pl)[i];
    const std::string ep = pp + "/" + std::to_string(i);
    static const ParallelDim dims[] = {ParallelDim::tensor, ParallelDim::data, ParallelDim::pipeline,
                                       ParallelDim::expert, ParallelDim::context};
    int k = -1;
    for (int d = 0; d < 5; ++d)
      if (e.is_string() && e.get<std::string>() == to_string(dims[d])) k = d;
    if (k < 0 || seen[k]) r.fail(ep, "expected " + what + ", got " + describe(e));
    seen[k] = true;
    placement.push_back(dims[k]);
  }
  if (!seen[0] || !seen[1] || !seen[2]) r.fail(pp, "expected " + what + ", got " + describe(*pl));
  // The expert-parallel groups are carved out of the data-parallel replicas: "expert" sits next to
  // "data", before it (the replicas that exchange tokens are neighbours) or after it (the replicas
  // of the same experts are neighbours, as in BaGuaLu's MoDa).
  for (size_t i = 0; i < placement.size(); ++i)
    if (placement[i] == ParallelDim::expert &&
        !((i > 0 && placement[i - 1] == ParallelDim::data) ||
          (i + 1 < placement.size() && placement[i + 1] == ParallelDim::data)))
      r.fail(pp + "/" + std::to_string(i), "expected \"expert\" right before or after \"data\" (expert groups are "
                                           "carved out of the data-parallel replicas)");
  return placement;
}

// The data-parallel size: /plan/data_parallel, or what /plan/devices leaves after the tensor, pipeline and
// context sizes (already read into s).
int read_data_parallel(const Reader& r, const json& p, const std::string& path, const ParallelPlan& s) {
  const json* devices = Reader::find(p, "devices");
  const json* data = Reader::find(p, "data_parallel");
  if (devices && data) r.fail(child(path, "devices"), "either devices or data_parallel, not both");
  if (devices) {
    const int n = r.integer(*devices, child(path, "devices"));
    // Checked: three 32-bit sizes can overflow 64 bits.
    const std::optional<std::int64_t> tp = checked_product({s.tensor, s.pipeline, s.context});
    if (!tp || n % *tp != 0)
      r.fail(child(path, "devices"), "expected a multiple of tensor_parallel x pipeline_parallel x context_parallel (" +
                                         (tp ? std::to_string(*tp) : std::string("more than 2^63")) + "), got " +
                                         std::to_string(n));
    return static_cast<int>(n / *tp);
  }
  return r.optional_int(p, path, "data_parallel", 1);
}

// plan.attention_kernel: one of the device file's flash_attention_kernels by name, plain or annotated
// ("" when absent: the device's own FlashAttention costing); models/plan_rules.cpp checks the name.
std::string read_attention_kernel_name(const Reader& r, const json& p, const std::string& path) {
  const json* v = Reader::find(p, "attention_kernel");
  if (!v) return "";
  std::string vpath = child(path, "attention_kernel");
  if (v->is_object()) {
    v = &r.annotated(*v, vpath, "the name of one of the device file's flash_attention_kernels");
    vpath = child(vpath, "value");
  }
  return r.string_value(*v, vpath, true);
}

ParallelPlan read_parallel_plan(const Reader& r, const json& root) {
  const std::string path = "/plan";
  const json& p = r.require(root, "", "plan", "a plan object");
  r.require_object(p, path, "a plan object");
  r.check_keys(p, path,
               {"devices", "data_parallel", "tensor_parallel", "tensor_mode", "tensor_depth", "pipeline_parallel", "schedule",
                "virtual_stages", "pipeline_engine", "grad_accum_dtype", "expert_parallel", "zero_stage", "distributed_optimizer", "paro", "recompute",
                 "sequence_parallel", "tp_comm_overlap", "attention", "attention_kernel", "context_parallel", "context_parallel_algorithm",
                 "prefetch_parameters",
                 "reduce_scatter_per_micro_batch", "grad_reduce_in_fp32", "distribute_saved_activations", "offload_optimizer", "micro_batch", "global_batch", "placement", "slice"});
  ParallelPlan s;
  s.tensor = r.optional_int(p, path, "tensor_parallel", 1);
  s.tensor_mode = r.choice(p, path, "tensor_mode",
                           {TensorMode::one_d, TensorMode::two_d, TensorMode::two_half_d, TensorMode::three_d},
                           std::optional(TensorMode::one_d));
  s.tensor_depth = r.optional_int(p, path, "tensor_depth", 1);
  s.pipeline = r.optional_int(p, path, "pipeline_parallel", 1);
  s.context = r.optional_int(p, path, "context_parallel", 1);
  s.context_algorithm = r.choice(
      p, path, "context_parallel_algorithm",
      {ParallelPlan::ContextParallelAlgorithm::ring, ParallelPlan::ContextParallelAlgorithm::all_gather},
      std::optional(ParallelPlan::ContextParallelAlgorithm::ring));
  if (Reader::find(p, "context_parallel_algorithm") && s.context == 1)
    r.fail(child(path, "context_parallel_algorithm"),
           "expected no context_parallel_algorithm: context_parallel is 1, so no keys or values are shared");
  s.virtual_stages = r.optional_int(p, path, "virtual_stages", 1);
  // Without a schedule: interleaved when the devices hold several model chunks, else 1F1B.
  s.schedule = r.choice(p, path, "schedule",
                        {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved},
                        std::optional(s.virtual_stages > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b));
  s.pipeline_engine = r.choice(p, path, "pipeline_engine", {PipelineEngine::megatron, PipelineEngine::deepspeed},
                               std::optional(PipelineEngine::megatron));
  if (Reader::find(p, "grad_accum_dtype"))
    s.grad_accum_dtype = r.choice(p, path, "grad_accum_dtype", std::vector<GradAccumDtype>{GradAccumDtype::fp32, GradAccumDtype::bf16});
  s.data = read_data_parallel(r, p, path, s);
  s.expert = r.optional_int(p, path, "expert_parallel", 1);
  if (const json* z = Reader::find(p, "zero_stage")) {
    const double v = r.number(*z, child(path, "zero_stage"), NumKind::non_negative);
    if (v != 0 && v != 1 && v != 2 && v != 3)
      r.fail(child(path, "zero_stage"), "expected 0, 1, 2 or 3, got " + z->dump());
    s.zero_stage = static_cast<int>(v);
  }
  // Megatron's distributed optimizer: ZeRO stage 1 (gradients reduce-scattered, the optimizer
  // state sharded, the updated parameters all-gathered).
  if (Reader::find(p, "distributed_optimizer")) {
    s.distributed_optimizer = r.required_annotated_bool(p, path, "distributed_optimizer");
    if (s.distributed_optimizer && Reader::find(p, "zero_stage") && s.zero_stage != 1)
      r.fail(child(path, "distributed_optimizer"), "expected false or no zero_stage: Megatron's distributed optimizer is "
                                                  "ZeRO stage 1, and zero_stage is " + std::to_string(s.zero_stage));
    if (s.distributed_optimizer) s.zero_stage = 1;
  }
  if (Reader::find(p, "paro")) s.paro = r.required_bool(p, path, "paro");
  if (Reader::find(p, "prefetch_parameters")) s.prefetch_parameters = r.required_annotated_bool(p, path, "prefetch_parameters");
  if (Reader::find(p, "reduce_scatter_per_micro_batch"))
    s.reduce_scatter_per_micro_batch = r.required_annotated_bool(p, path, "reduce_scatter_per_micro_batch");
  if (Reader::find(p, "grad_reduce_in_fp32")) s.grad_reduce_in_fp32 = r.required_annotated_bool(p, path, "grad_reduce_in_fp32");
  if (Reader::find(p, "distribute_saved_activations"))
    s.distribute_saved_activations = r.required_annotated_bool(p, path, "distribute_saved_activations");
  s.recompute = r.choice(p, path, "recompute", {Recompute::none, Recompute::selective, Recompute::full},
                         std::optional(Recompute::none));
  s.attention = r.choice(p, path, "attention", {ParallelPlan::Attention::standard, ParallelPlan::Attention::flash},
                         std::optional(ParallelPlan::Attention::standard));
  s.attention_kernel = read_attention_kernel_name(r, p, path);
  if (Reader::find(p, "sequence_parallel")) s.sequence_parallel = r.required_annotated_bool(p, path, "sequence_parallel");
  if (Reader::find(p, "tp_comm_overlap")) s.tp_comm_overlap = r.required_annotated_bool(p, path, "tp_comm_overlap");
  if (Reader::find(p, "offload_optimizer")) s.offload_optimizer = r.required_annotated_bool(p, path, "offload_optimizer");
  s.micro_batch = r.required_int(p, path, "micro_batch");
  s.global_batch = r.required_int(p, path, "global_batch");
  if (const json* pl = Reader::find(p, "placement")) s.placement = read_placement(r, *pl, child(path, "placement"));
  return s;
}

// The machine file's checkpoint_write_Bps (the file system's aggregate write bandwidth), read only
// for a scenario with a "resilience" block so that other scenarios' reports do not list it.
double read_checkpoint_write_Bps(const Reader& r, const json& root) {
  const json& m = root.at("machine");
  const std::string what = kSharedLinkBandwidthRange.describe() + " (the file system's write bandwidth, needed by /resilience)";
  if (m.is_object()) return r.ranged(r.require(m, "/machine", "checkpoint_write_Bps", what), "/machine/checkpoint_write_Bps",
                                     kSharedLinkBandwidthRange);
  const auto [label, doc] = embedded_json(r, m, "/machine", kMachineDir, "machine");
  const Reader nr = r.nested(label, "/machine");
  return nr.ranged(nr.require(doc, "", "checkpoint_write_Bps", what), "/checkpoint_write_Bps", kSharedLinkBandwidthRange);
}

// "resilience": per-component MTBFs, restart time and checkpoint interval (models/goodput.hpp).
std::optional<ResilienceSpec> read_resilience(const Reader& r, const json& root, MachineSpec& machine) {
  const json* v = Reader::find(root, "resilience");
  if (!v) return std::nullopt;
  const std::string path = "/resilience";
  r.require_object(*v, path, "a resilience object");
  r.check_keys(*v, path, {"node_mtbf_s", "link_mtbf_s", "switch_mtbf_s", "restart_s", "checkpoint_interval_s"});
  ResilienceSpec s;
  s.node_mtbf_s = r.required_number(*v, path, "node_mtbf_s", NumKind::positive);
  if (Reader::find(*v, "link_mtbf_s")) s.link_mtbf_s = r.required_number(*v, path, "link_mtbf_s", NumKind::positive);
  if (Reader::find(*v, "switch_mtbf_s"))
    s.switch_mtbf_s = r.required_number(*v, path, "switch_mtbf_s", NumKind::positive);
  s.restart_s = r.required_number(*v, path, "restart_s", NumKind::non_negative);
  if (Reader::find(*v, "checkpoint_interval_s"))
    s.checkpoint_interval_s = r.required_number(*v, path, "checkpoint_interval_s", NumKind::positive);
  machine.checkpoint_write_Bps = read_checkpoint_write_Bps(r, root);
  return s;
}

// An explicit list of network nodes or link instances: non-negative integers below count, no repeats.
std::vector<int> read_node_list(const Reader& r, const json& v, const std::string& path, long long node_count) {
  const std::string what = "entries (integers in [0, " + std::to_string(node_count) + "))";
  if (!v.is_array() || v.empty()) r.fail(path, "expected a non-empty array of " + what + ", got " + describe(v));
  std::vector<int> nodes;
  std::set<int> seen;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& n = v[i];
    const std::string at = path + "/" + std::to_string(i);
    if (!n.is_number_integer() || n.get<long long>() < 0 || n.get<long long>() >= node_count)
      r.fail(at, "expected one of the machine's " + what + ", got " + n.dump());
    if (!seen.insert(n.get<int>()).second) r.fail(at, "expected each entry once, got " + n.dump() + " again");
    nodes.push_back(n.get<int>());
  }
  return nodes;
}

// A fraction of the job's components: a number in [0, 1).
double read_fault_fraction(const Reader& r, const json& obj, const std::string& path) {
  const double x = r.required_number(obj, path, "fraction", NumKind::non_negative);
  if (!(x < 1))
    r.fail(child(path, "fraction"), "expected a fraction in [0, 1) of the job's nodes or links, got " +
                                        obj.at("fraction").dump());
  return x;
}

// A slowdown factor: a number of at least 1 (1: not slowed), default 1.
double read_slow_factor(const Reader& r, const json& obj, const std::string& path, const std::string& key) {
  if (!Reader::find(obj, key)) return 1;
  const double x = r.required_number(obj, path, key, NumKind::positive);
  if (!(x >= 1)) r.fail(child(path, key), "expected a slowdown factor of at least 1, got " + obj.at(key).dump());
  return x;
}

// Either a list under `list_key` or a "fraction" (drawn with /faults/seed); returns whether drawn.
bool read_listed_or_drawn(const Reader& r, const json& obj, const std::string& path, const char* list_key,
                          long long count, std::vector<int>& listed, double& fraction) {
  const bool is_listed = Reader::find(obj, list_key) != nullptr;
  if (is_listed == (Reader::find(obj, "fraction") != nullptr))
    r.fail(path, std::string("expected either \"") + list_key + "\" (a list) or \"fraction\" (drawn with /faults/seed)");
  if (is_listed) listed = read_node_list(r, obj.at(list_key), path + "/" + list_key, count);
  else fraction = read_fault_fraction(r, obj, path);
  return !is_listed;
}

bool read_stragglers(const Reader& r, const json& st, const std::string& sp, const MachineSpec& machine,
                     StragglerSpec& s) {
  r.require_object(st, sp, "a stragglers object");
  r.check_keys(st, sp, {"nodes", "fraction", "compute_factor", "link_factor"});
  const bool drawn = read_listed_or_drawn(r, st, sp, "nodes", machine.device_count(), s.nodes, s.fraction);
  s.compute_factor = read_slow_factor(r, st, sp, "compute_factor");
  s.link_factor = read_slow_factor(r, st, sp, "link_factor");
  if (s.compute_factor == 1 && s.link_factor == 1)
    r.fail(sp, "expected a compute_factor or a link_factor above 1 (stragglers are slower)");
  return drawn;
}

// "links": per link kind, instances or a fraction at a bandwidth factor in (0, 1). The kind and
// the instances are checked against the machine's network when it is built (app/pipeline.cpp).
bool read_link_faults(const Reader& r, const json& v, const std::string& path, std::vector<LinkFaultSpec>& out) {
  if (!v.is_array() || v.empty()) r.fail(path, "expected a non-empty array of link faults, got " + describe(v));
  bool drawn = false;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string lp = path + "/" + std::to_string(i);
    const json& l = v[i];
    r.require_object(l, lp, "a link fault object");
    r.check_keys(l, lp, {"kind", "instances", "fraction", "bandwidth_factor"});
    LinkFaultSpec f;
    f.kind = r.required_string(l, lp, "kind");
    drawn = read_listed_or_drawn(r, l, lp, "instances", INT_MAX, f.instances, f.fraction) || drawn;
    f.bandwidth_factor = r.required_number(l, lp, "bandwidth_factor", NumKind::fraction);
    if (!(f.bandwidth_factor < 1))
      r.fail(lp + "/bandwidth_factor", "expected a fraction in (0, 1) of the links' bandwidth (a degraded link), got " +
                                           l.at("bandwidth_factor").dump());
    out.push_back(std::move(f));
  }
  return drawn;
}

bool read_node_faults(const Reader& r, const json& v, const std::string& path, const MachineSpec& machine,
                      NodeFaultSpec& s) {
  r.require_object(v, path, "a failed_nodes object");
  r.check_keys(v, path, {"nodes", "fraction", "spares"});
  const bool drawn = read_listed_or_drawn(r, v, path, "nodes", machine.device_count(), s.nodes, s.fraction);
  s.spares = r.required_int(v, path, "spares");
  return drawn;
}

// A non-negative integer under key (an index: a link instance, a spine group, a switch).
int read_index(const Reader& r, const json& obj, const std::string& path, const char* key) {
  const json& v = r.require(obj, path, key, "a non-negative integer");
  if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > INT_MAX)
    r.fail(path + "/" + key, "expected a non-negative integer, got " + v.dump());
  return v.get<int>();
}

// "failed_links": cables down, each {kind, instance, cables (fat tree, default 1)}; checked against
// the network when it is built (topologies/faults.hpp apply_failures).
void read_failed_links(const Reader& r, const json& v, const std::string& path, std::vector<FailedLinkSpec>& out) {
  if (!v.is_array() || v.empty()) r.fail(path, "expected a non-empty array of failed links, got " + describe(v));
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string lp = path + "/" + std::to_string(i);
    r.require_object(v[i], lp, "a failed link object");
    r.check_keys(v[i], lp, {"kind", "instance", "cables"});
    FailedLinkSpec f;
    f.kind = r.required_string(v[i], lp, "kind");
    f.instance = read_index(r, v[i], lp, "instance");
    f.has_cables = Reader::find(v[i], "cables") != nullptr;
    f.cables = r.optional_int(v[i], lp, "cables", 1);
    out.push_back(std::move(f));
  }
}

// "failed_switches": spine switches down, each {spine_group, switch}.
void read_failed_switches(const Reader& r, const json& v, const std::string& path, std::vector<FailedSwitchSpec>& out) {
  if (!v.is_array() || v.empty()) r.fail(path, "expected a non-empty array of failed switches, got " + describe(v));
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string sp = path + "/" + std::to_string(i);
    r.require_object(v[i], sp, "a failed switch object");
    r.check_keys(v[i], sp, {"spine_group", "switch"});
    out.push_back({read_index(r, v[i], sp, "spine_group"), read_index(r, v[i], sp, "switch")});
  }
}

// "faults": failed nodes, degraded links and stragglers (topologies/faults.hpp), and the seed of
// every drawn fraction (required exactly when something is drawn).
std::optional<FaultSpec> read_faults(const Reader& r, const json& root, const MachineSpec& machine) {
  const json* v = Reader::find(root, "faults");
  if (!v) return std::nullopt;
  const std::string path = "/faults";
  r.require_object(*v, path, "a faults object");
  r.check_keys(*v, path, {"seed", "failed_nodes", "links", "stragglers", "failed_links", "failed_switches"});
  FaultSpec f;
  bool drawn = false;
  if (const json* n = Reader::find(*v, "failed_nodes")) {
    f.has_failed_nodes = true;
    drawn = read_node_faults(r, *n, path + "/failed_nodes", machine, f.failed_nodes) || drawn;
  }
  if (const json* l = Reader::find(*v, "links")) drawn = read_link_faults(r, *l, path + "/links", f.links) || drawn;
  if (const json* st = Reader::find(*v, "stragglers")) {
    f.has_stragglers = true;
    drawn = read_stragglers(r, *st, path + "/stragglers", machine, f.stragglers) || drawn;
  }
  if (const json* l = Reader::find(*v, "failed_links")) read_failed_links(r, *l, path + "/failed_links", f.failed_links);
  if (const json* s = Reader::find(*v, "failed_switches"))
    read_failed_switches(r, *s, path + "/failed_switches", f.failed_switches);
  if (!f.has_failed_nodes && f.links.empty() && !f.has_stragglers && f.failed_links.empty() && f.failed_switches.empty())
    r.fail(path, "expected at least one of failed_nodes, links, stragglers, failed_links, failed_switches");
  const json* seed = Reader::find(*v, "seed");
  if (drawn != (seed != nullptr))
    r.fail(path + "/seed", drawn ? "missing (expected a non-negative integer: the seed of the drawn fractions)"
                                 : "expected no seed: nothing is drawn (every fault is listed)");
  if (seed) {
    if (!seed->is_number_integer() || seed->get<long long>() < 0)
      r.fail(path + "/seed", "expected a non-negative integer, got " + seed->dump());
    f.seed = seed->get<std::uint64_t>();
  }
  return f;
}

// "engine": the fidelity, and "every_micro_batch" (true: no steady-state folding in time).
void read_engine(const Reader& r, const json& root, Scenario& s) {
  const json* e = Reader::find(root, "engine");
  if (!e) return;
  const std::string path = "/engine";
  r.require_object(*e, path, "an engine object");
  r.check_keys(*e, path, {"fidelity", "every_micro_batch"});
  s.fidelity = r.choice(*e, path, "fidelity", {Fidelity::folded, Fidelity::exhaustive}, std::optional(Fidelity::folded));
  if (Reader::find(*e, "every_micro_batch")) s.every_micro_batch = r.required_bool(*e, path, "every_micro_batch");
}

}  // namespace

// "slice": [x, y] on a torus machine: the plan runs on an x-by-y slice of the pod, itself a torus
// (a TPU slice such as v3-512, 16 x 16 chips), and the machine becomes that slice. Its chips must
// be the plan's devices and fit in the pod.
void read_torus_slice(const Reader& r, const json& root, Scenario& s) {
  const json* plan = Reader::find(root, "plan");
  const json* v = plan && plan->is_object() ? Reader::find(*plan, "slice") : nullptr;
  if (!v) return;
  const std::string path = "/plan/slice";
  const MachineSpec& mc = s.machine;
  if (mc.family != "torus")
    r.fail(path, "expected no slice: machine " + quoted(mc.name) + " is not a torus (family " + quoted(mc.family) + ")");
  if (!v->is_array() || v->size() != 2)
    r.fail(path, "expected [x, y], the slice's chips per row and rows, got " + describe(*v));
  const int x = r.integer((*v)[0], path + "/0"), y = r.integer((*v)[1], path + "/1");
  const ParallelPlan& p = s.parallel;
  const long long devices = static_cast<long long>(p.data) * p.tensor * p.pipeline * p.context;
  if (static_cast<long long>(x) * y != devices)
    r.fail(path, "expected a torus shape of the plan's " + std::to_string(devices) + " devices, got " +
                     std::to_string(x) + " x " + std::to_string(y) + " = " + std::to_string(static_cast<long long>(x) * y));
  if (x > s.machine.torus.x || y > s.machine.torus.y)
    r.fail(path, "expected a slice of the " + std::to_string(s.machine.torus.x) + " x " +
                     std::to_string(s.machine.torus.y) + " torus, got " + std::to_string(x) + " x " + std::to_string(y));
  s.machine.torus.x = x;
  s.machine.torus.y = y;
}

Scenario parse_scenario(const std::string& json_text, const std::string& file) {
  return parse_scenario_doc(parse_json(json_text, file), file);
}

Scenario parse_scenario_doc(const nlohmann::json& root, const std::string& file) {
  Scenario s;
  s.file = file;
  Reader r(file, "", &s.annotations);
  r.require_object(root, "", "a JSON object at the top level");
  r.check_keys(root, "", {"name", "description", "machine", "model", "training", "plan", "engine", "resilience", "faults"});
  s.name = r.required_string(root, "", "name");
  s.description = r.optional_string(root, "", "description");
  s.machine = read_machine(r, root);
  s.model = read_model(r, root);
  if (s.model.is_convnet()) {
    s.plan_kind = Scenario::PlanKind::general;
    s.training = read_convnet_training(r, root);
    s.parallel = read_convnet_plan(r, root);
    if (s.training.grad_sync == GradSync::per_tensor && (s.parallel.data == 1 || s.parallel.zero_stage == 1))
      r.fail("/training/grad_sync", "expected \"after_backward\": per_tensor all-reduces each whole gradient over the "
                                    "replicas, so devices must be at least 2 and weight_update_sharding false");
    read_torus_slice(r, root, s);
    read_batch_norm_tile(r, root, s);
    read_engine(r, root, s);
    s.resilience = read_resilience(r, root, s.machine);
    s.faults = read_faults(r, root, s.machine);
    check_plan_rules(r, s);
    return s;
  }
  const json* plan = Reader::find(root, "plan");
  const bool general = plan && plan->is_object() && !plan->contains("layout");
  s.training = read_training(r, root, general);
  if (general) {
    s.plan_kind = Scenario::PlanKind::general;
    s.parallel = read_parallel_plan(r, root);
    read_torus_slice(r, root, s);
  } else {
    s.plan = read_plan(r, root);
  }
  read_engine(r, root, s);
  s.resilience = read_resilience(r, root, s.machine);
  s.faults = read_faults(r, root, s.machine);
  check_plan_rules(r, s);
  return s;
}

std::optional<Scenario> parse_outside_plan(const nlohmann::json& root, const std::string& file) {
  const json* plan = root.is_object() ? Reader::find(root, "plan") : nullptr;
  if (!plan || !plan->is_object() || plan->contains("layout") || plan->contains("slice") ||
      Reader::find(root, "resilience") || Reader::find(root, "faults"))
    return std::nullopt;
  Scenario s;  // parse_scenario_doc's order, without the plan's reads
  s.file = file;
  Reader r(file, "", &s.annotations);
  r.check_keys(root, "", {"name", "description", "machine", "model", "training", "plan", "engine", "resilience", "faults"});
  s.name = r.required_string(root, "", "name");
  s.description = r.optional_string(root, "", "description");
  s.machine = read_machine(r, root);
  s.model = read_model(r, root);
  if (s.model.is_convnet()) return std::nullopt;
  s.training = read_training(r, root, true);
  s.plan_kind = Scenario::PlanKind::general;
  read_engine(r, root, s);
  return s;
}

Scenario parse_plan_variant(const Scenario& outside_plan, const nlohmann::json& root) {
  Scenario s = outside_plan;
  std::vector<Annotation> plan_annotations;  // not kept
  Reader r(s.file, "", &plan_annotations);
  s.parallel = read_parallel_plan(r, root);
  check_plan_rules(r, s);
  return s;
}

Scenario load_scenario_file(const std::string& path) {
  std::string text;
  const std::string why = read_text_file(path, text);
  if (!why.empty()) throw ScenarioError(path, "", "expected a readable file (" + why + ")");
  return parse_scenario(text, path);
}

std::string escape_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

}  // namespace exasim
