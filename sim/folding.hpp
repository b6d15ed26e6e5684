// Folding: which ranks a simulation runs, and how shared links fold. Pure functions of the
// workload and the network (no SimGrid), so that they can be tested without a simulation.
//
// Exhaustive fidelity runs every rank. Folded fidelity runs one representative per rank
// class (the first rank of the class); the class of a rank is folding_class(w, rank), the seam
// through which other mechanisms (e.g. per-rank slowness) may split classes. A class must not
// mix programs.
//
// A shared link kind folds each domain onto a folded link standing for every domain that holds
// the same classes with the same largest count n: the representatives of those classes share
// it at 1/n of the link's capacity, as the n ranks of a class share the real one. When every
// domain holds every class alike (a MoDa layout on supernodes) there is one folded link per
// kind, and the folding is exact for symmetric patterns; on a rail-optimized fat tree whose
// leaves each hold one pipeline stage there is one per stage. A domain holding its classes
// unequally (a pipeline stage that ends inside a leaf group) is folded with its largest count:
// exact for the class it holds most of, pessimistic for the others. A domain whose link runs at
// another fraction of its kind's bandwidth (Network::bandwidth_factor: a degraded uplink) folds
// only with domains whose link runs at the same fraction.
#pragma once
#include <map>
#include <unordered_map>
#include <vector>

#include "sim/network.hpp"
#include "sim/workload.hpp"

namespace exasim {

enum class Fidelity { folded, exhaustive };
const char* to_string(Fidelity f);

// The folding class of a rank: ranks of one class are simulated by one representative.
int folding_class(const Workload& w, int rank);

struct FoldedDomain {
  int instance = 0;  // the folded link standing for this domain
  int per = 1;       // the ranks a representative stands for in this domain (capacity divisor)
  double bandwidth_factor = 1;  // the domain's link's Network::bandwidth_factor
};

struct Folding {
  Fidelity fidelity = Fidelity::folded;
  std::vector<int> slot_rank;     // simulated slot -> the rank it runs
  std::vector<int> rank_slot;     // rank -> its slot, -1 when folded away
  std::vector<int> multiplicity;  // slot -> the ranks it stands for
  std::unordered_map<int, int> slot_of_class;  // folded: class -> its representative's slot
  // folded: per link kind (empty for node-private kinds), each domain's folded link
  std::vector<std::map<int, FoldedDomain>> domain;

  // The slot whose flows stand for `rank`'s: its own (exhaustive), its class representative's.
  int slot_standing_for(const Workload& w, int rank) const;
};

// Throws std::runtime_error when a class mixes programs.
Folding fold_ranks(const Workload& w, const Network& net, Fidelity f);

}  // namespace exasim
