// A workload: the step graphs ranks run (one program per kind of rank: every rank of a
// data-parallel MoE layout runs the same one; each pipeline stage runs its own), where each
// rank sits, which group it belongs to for each group role, and which ranks behave alike
// (for folding).
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
  std::vector<StepGraph> programs = std::vector<StepGraph>(1);
  std::vector<int> program_of_rank;  // per rank; empty: every rank runs programs[0]
  int rank_count = 0;
  std::map<std::string, GroupTable> groups;  // by group role
  std::vector<int> node_of_rank;
  // Ranks with the same class run the same program at symmetric positions: folding
  // simulates one representative per class. Exhaustive runs ignore it.
  // Ranks of one class run the same program.
  std::vector<int> class_of_rank;

  int program_index(int rank) const { return program_of_rank.empty() ? 0 : program_of_rank.at(rank); }
  const StepGraph& program(int rank) const { return programs.at(program_index(rank)); }
};

}  // namespace exasim
