#include "topologies/mpich_tuning.hpp"

#include <map>

#include "sim/physical_range.hpp"

namespace exasim {

CollectiveAlgorithm mpich_algorithm(const MpichTuning& t, CollectiveKind kind, int ranks, double bytes,
                                    CollectiveAlgorithm current) {
  using A = CollectiveAlgorithm;
  switch (kind) {
    case CollectiveKind::all_reduce: return bytes <= t.allreduce_short_msg_bytes ? A::recursive_doubling : A::rabenseifner;
    case CollectiveKind::reduce_scatter:
      return bytes < t.redscat_commutative_long_msg_bytes ? A::rabenseifner : A::pairwise;
    case CollectiveKind::all_gather: {
      const bool power_of_two = ranks > 0 && (ranks & (ranks - 1)) == 0;
      return bytes < t.allgather_long_msg_bytes && power_of_two ? A::recursive_doubling : A::ring;
    }
    case CollectiveKind::all_to_all: break;
  }
  return current;
}

int adopt_mpich_tuning(Workload& w, const MpichTuning& t) {
  if (t.name.empty()) return 0;
  std::map<std::string, int> ranks_of_role;  // the role's first group of 2 or more
  for (const auto& [role, gt] : w.groups)
    for (const auto& members : gt.members)
      if (members.size() >= 2) {
        ranks_of_role[role] = static_cast<int>(members.size());
        break;
      }
  int set = 0;
  for (StepGraph& g : w.programs)
    for (auto v : boost::make_iterator_range(boost::vertices(g))) {
      auto* c = std::get_if<CollectiveWork>(&g[v].work);
      if (!c || c->kind == CollectiveKind::all_to_all || c->algorithm != CollectiveAlgorithm::ring || c->bytes <= 0)
        continue;
      auto it = ranks_of_role.find(c->group_role);
      if (it == ranks_of_role.end()) continue;
      // every group of the role must have the size the choice was made for
      const auto& groups = w.groups.at(c->group_role).members;
      bool alike = true;
      for (const auto& members : groups) alike = alike && (members.size() < 2 || static_cast<int>(members.size()) == it->second);
      if (!alike) continue;
      const CollectiveAlgorithm a = mpich_algorithm(t, c->kind, it->second, c->bytes, c->algorithm);
      if (a != c->algorithm) {
        c->algorithm = a;
        set++;
      }
    }
  return set;
}

namespace {

constexpr PhysicalRange kThresholdRange{1, 1e12, "bytes", "0, or 1 byte to 1 TB per collective", true};

// obj[key] = {"value": bytes, "source": "..."}.
double read_threshold(const MachineReader& r, const nlohmann::json& doc, const std::string& path, const char* key) {
  return r.required_ranged(doc, path, key, kThresholdRange);
}

}  // namespace

void read_mpich_tuning(const MachineReader& r, const nlohmann::json& doc, const std::string& path, MpichTuning& t) {
  r.require_object(doc, path, "a collective library object");
  r.check_keys(doc, path,
               {"name", "description", "source", "allreduce_short_msg_bytes", "redscat_commutative_long_msg_bytes",
                "allgather_short_msg_bytes", "allgather_long_msg_bytes"});
  for (const char* key : {"name", "source"}) {
    const nlohmann::json& v = r.require(doc, path, key, "a non-empty string");
    if (!v.is_string() || v.get<std::string>().empty())
      r.fail(MachineReader::key_path(path, key), "expected a non-empty string, got " + v.dump());
  }
  t.name = doc.at("name").get<std::string>();
  t.allreduce_short_msg_bytes = read_threshold(r, doc, path, "allreduce_short_msg_bytes");
  t.redscat_commutative_long_msg_bytes = read_threshold(r, doc, path, "redscat_commutative_long_msg_bytes");
  t.allgather_short_msg_bytes = read_threshold(r, doc, path, "allgather_short_msg_bytes");
  t.allgather_long_msg_bytes = read_threshold(r, doc, path, "allgather_long_msg_bytes");
}

}  // namespace exasim
