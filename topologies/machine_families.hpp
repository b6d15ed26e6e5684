// What each machine family adds to a run beyond its network (topologies/network_factory.hpp): its
// machine-file reader and device-count words (the registry below), the report's machine object,
// the class split of its ranks and its own collective algorithms. A new family adds its entry and
// cases here and in make_network; app/ iterates the registry, calls these and names no family.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/network.hpp"
#include "sim/workload.hpp"
#include "topologies/machine_spec.hpp"

namespace exasim {

class MachineReader;

// One machine family: the "family" word of a machine file and how its file is read.
struct MachineFamily {
  const char* name;
  // Reads the family's keys of machine object `m` at `path` into `s` (topologies/machine_reader.hpp).
  void (*read)(const MachineReader& r, const nlohmann::json& m, const std::string& path, MachineSpec& s);
  // For a machine of more devices than ranks can number: the key the message names, and the
  // product that made the count ("4 supernodes x 256 nodes").
  const char* count_key;
  std::string (*device_product)(const MachineSpec& s);
};

// Every family, in the order the parser lists them in its messages.
const std::vector<MachineFamily>& machine_families();

// The report's "machine" object: name, family, devices, device word and the family's own fields.
nlohmann::json machine_report_json(const MachineSpec& m);

// Splits the ranks' classes where the family's inner level sets ranks apart (a GPU node: whether a
// ring neighbour shares the rank's NVLink); other families leave them as they are.
void split_classes_for_family(Workload& w, const MachineSpec& m);

// The family's own collective algorithms, adopted as its hardware and libraries run them: a torus's
// 2-D algorithms and simultaneous all-to-alls, a GPU cluster's NCCL multi-ring. `net` is the
// network make_network built for `m`.
void adopt_family_collectives(Workload& w, const Network& net, const MachineSpec& m);

}  // namespace exasim
