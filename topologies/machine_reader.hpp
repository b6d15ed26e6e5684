// How a machine family reads its own keys of a machine file. app/scenario.cpp's strict reader
// stands behind this interface: every method checks its value and throws the scenario parser's
// error (file, JSON path, what was expected) on bad input, records annotated values, and the
// family's reader (beside its network in topologies/) names only its keys and its MachineSpec
// fields. The registry that app/ iterates is topologies/machine_families.hpp.
#pragma once
#include <functional>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/physical_range.hpp"
#include "topologies/machine_spec.hpp"

namespace exasim {

class MachineReader {
 public:
  virtual ~MachineReader() = default;
  [[noreturn]] virtual void fail(const std::string& path, const std::string& expected) const = 0;
  // Refuses any key of `obj` not in `allowed`.
  virtual void check_keys(const nlohmann::json& obj, const std::string& path,
                          std::initializer_list<const char*> allowed) const = 0;
  // obj[key], which must be present (`what`: what it should be, for the message).
  virtual const nlohmann::json& require(const nlohmann::json& obj, const std::string& path, const std::string& key,
                                        const std::string& what) const = 0;
  virtual void require_object(const nlohmann::json& v, const std::string& path, const std::string& what) const = 0;
  virtual int required_int(const nlohmann::json& obj, const std::string& path, const std::string& key) const = 0;
  virtual int optional_int(const nlohmann::json& obj, const std::string& path, const std::string& key,
                           int dflt) const = 0;
  virtual bool required_annotated_bool(const nlohmann::json& obj, const std::string& path,
                                       const std::string& key) const = 0;
  virtual double required_positive(const nlohmann::json& obj, const std::string& path, const std::string& key) const = 0;
  // A number in (0, 1].
  virtual double required_fraction(const nlohmann::json& obj, const std::string& path, const std::string& key) const = 0;
  virtual double required_ranged(const nlohmann::json& obj, const std::string& path, const std::string& key,
                                 const PhysicalRange& range) const = 0;
  // The machine's "device" (a name in topologies/devices/ or an object) into s's device fields.
  virtual void read_device(const nlohmann::json& m, const std::string& path, MachineSpec& s) const = 0;
  // A data file named by `ref` (a name of an embedded file under `dir`, e.g. "topologies/libraries/",
  // or an inline object) at `path`, handed to `read` with a reader whose errors name that file.
  virtual void read_named_file(const nlohmann::json& ref, const std::string& path, const std::string& dir,
                               const std::string& what,
                               const std::function<void(const MachineReader&, const nlohmann::json&,
                                                        const std::string&)>& read) const = 0;
  // A value (a number or an annotated number) at `path` itself, in `range` (e.g. an array's element).
  virtual double ranged_value(const nlohmann::json& v, const std::string& path, const PhysicalRange& range) const = 0;
  // Checks "checkpoint_write_Bps" where the file gives it (every family accepts it).
  virtual void check_checkpoint_write_Bps(const nlohmann::json& m, const std::string& path) const = 0;

  // The JSON path of a plain key (no '~' or '/' in it) below `path`.
  static std::string key_path(const std::string& path, const char* key) { return path + "/" + key; }
  static bool has(const nlohmann::json& obj, const char* key) { return obj.find(key) != obj.end(); }
};

// Each family's reader, defined beside its network: the family's keys of a machine object `m` at
// `path` into `s` (name, description and sources are read by the caller).
void read_gpu_cluster_machine(const MachineReader& r, const nlohmann::json& m, const std::string& path, MachineSpec& s);
void read_torus_machine(const MachineReader& r, const nlohmann::json& m, const std::string& path, MachineSpec& s);
void read_sunway_machine(const MachineReader& r, const nlohmann::json& m, const std::string& path, MachineSpec& s);

}  // namespace exasim
