#include "sim/workload.hpp"

#include <stdexcept>

namespace exasim {

void GroupTable::index(int rank_count) {
  group_of_rank.assign(rank_count, -1);
  index_in_group.assign(rank_count, -1);
  for (size_t g = 0; g < members.size(); ++g)
    for (size_t i = 0; i < members[g].size(); ++i) {
      const int r = members[g][i];
      if (r < 0 || r >= rank_count) throw std::logic_error("group member out of range");
      if (group_of_rank[r] != -1) throw std::logic_error("rank in two groups of one role");
      group_of_rank[r] = static_cast<int>(g);
      index_in_group[r] = static_cast<int>(i);
    }
}

}  // namespace exasim
