#include "topologies/inner_level_classes.hpp"

#include <boost/range/iterator_range.hpp>
#include <map>
#include <variant>
#include <utility>

namespace exasim {

bool role_runs_only_multi_ring(const Workload& w, const std::string& role) {
  for (const StepGraph& g : w.programs)
    for (auto v : boost::make_iterator_range(boost::vertices(g))) {
      const Op& op = g[v];
      if (const auto* c = std::get_if<CollectiveWork>(&op.work)) {
        if (c->group_role != role) continue;
        if (c->algorithm != CollectiveAlgorithm::multi_ring) return false;
      } else if (const auto* t = std::get_if<TransferWork>(&op.work)) {
        if (t->group_role == role) return false;
      }
    }
  return true;
}

bool groups_straddle_inner_levels(const Workload& w, int L) {
  if (L <= 1) return false;
  for (const auto& [role, table] : w.groups) {
    bool straddles = false;
    for (const auto& members : table.members) {
      const size_t n = members.size();
      if (n < 2) continue;
      bool inside = false, across = false;
      for (size_t m = 0; m < n; ++m) {
        const int a = w.node_of_rank.at(members[m]), b = w.node_of_rank.at(members[(m + 1) % n]);
        (a / L == b / L ? inside : across) = true;
      }
      if (inside && across) {
        straddles = true;
        break;
      }
    }
    if (straddles && !role_runs_only_multi_ring(w, role)) return true;
  }
  return false;
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
