#include "topologies/inner_level_classes.hpp"

#include <algorithm>
#include <boost/range/iterator_range.hpp>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace exasim {

namespace {

// The role of an op that tells the offsets of its group apart: a collective other than the
// multi-ring's, or a point-to-point transfer; nullptr for the others (compute, multi-ring).
const std::string* role_telling_offsets_apart(const Op& op) {
  if (const auto* c = std::get_if<CollectiveWork>(&op.work))
    return c->algorithm == CollectiveAlgorithm::multi_ring ? nullptr : &c->group_role;
  if (const auto* t = std::get_if<TransferWork>(&op.work)) return &t->group_role;
  return nullptr;
}

// True when some op of some program over one of `roles` tells offsets apart (one pass).
bool some_role_tells_offsets_apart(const Workload& w, const std::vector<std::string>& roles) {
  for (const StepGraph& g : w.programs)
    for (auto v : boost::make_iterator_range(boost::vertices(g)))
      if (const std::string* role = role_telling_offsets_apart(g[v]))
        if (std::find(roles.begin(), roles.end(), *role) != roles.end()) return true;
  return false;
}

bool straddles(const Workload& w, const GroupTable& table, int L) {
  for (const auto& members : table.members) {
    const size_t n = members.size();
    if (n < 2) continue;
    bool inside = false, across = false;
    for (size_t m = 0; m < n; ++m) {
      const int a = w.node_of_rank.at(members[m]), b = w.node_of_rank.at(members[(m + 1) % n]);
      (a / L == b / L ? inside : across) = true;
    }
    if (inside && across) return true;
  }
  return false;
}

}  // namespace

bool role_runs_only_multi_ring(const Workload& w, const std::string& role) {
  return !some_role_tells_offsets_apart(w, {role});
}

bool groups_straddle_inner_levels(const Workload& w, int L) {
  if (L <= 1) return false;
  std::vector<std::string> roles;  // the roles whose groups straddle
  for (const auto& [role, table] : w.groups)
    if (straddles(w, table, L)) roles.push_back(role);
  return !roles.empty() && some_role_tells_offsets_apart(w, roles);
}

bool split_classes_at_inner_level(Workload& w, int L) {
  if (!groups_straddle_inner_levels(w, L)) return false;
  std::map<std::pair<int, int>, int> id;  // (class, offset) -> new class
  for (int r = 0; r < w.rank_count; ++r) {
    const auto key = std::make_pair(w.class_of_rank.at(r), w.node_of_rank.at(r) % L);
    auto it = id.find(key);
    if (it == id.end()) it = id.emplace(key, static_cast<int>(id.size())).first;
    w.class_of_rank[r] = it->second;
  }
  return true;
}

}  // namespace exasim
