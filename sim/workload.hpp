// A workload: the step graph every rank runs (SPMD), where each rank sits, which group
// it belongs to for each group role, and which ranks behave alike (for folding).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "sim/step_graph.hpp"

namespace exasim {

struct GroupTable {
  std::vector<std::vector<int>> members;  // per group: ranks in member order
  std::vector<int> group_of_rank;         // per rank: its group, -1 if none
  std::vector<int> index_in_group;        // per rank: its member index, -1 if none
  // Members [b * block_size, (b + 1) * block_size) of every group are local to each other (they
  // share the machine's inner level, e.g. a supernode): hierarchical collectives use it.
  int block_size = 1;
  // Builds the per-rank lookups from `members`.
  void index(int rank_count);
};

struct Workload {
  StepGraph graph;
  int rank_count = 0;
  std::map<std::string, GroupTable> groups;  // by group role
  std::vector<int> node_of_rank;
  // Ranks with the same class run the same program at symmetric positions: folding
  // simulates one representative per class. Exhaustive runs ignore it.
  std::vector<int> class_of_rank;
};

}  // namespace exasim
