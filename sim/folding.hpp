// Folding: which ranks a simulation runs, and how shared links fold. Pure functions of the
// workload and the network (no SimGrid), so that they can be tested without a simulation.
//
// Exhaustive fidelity runs every rank. Folded fidelity runs one representative per rank
// class (the first rank of the class); the class of a rank is folding_class(w, rank), the seam
// through which other mechanisms (e.g. per-rank slowness) may split classes. A class must not
// mix programs.
//
// A shared link kind folds each domain onto a folded link standing for every domain that holds
// the same classes in the same proportions, at the same scale and bandwidth fraction. In a domain
// whose classes hold n_1 .. n_C ranks, the folded link runs at B / g (g: the largest common
// divisor of the n_c) and the flow of class c's representative counts n_c / g times on it (its
// route lists the link n_c / g times: SimGrid's max-min then gives it n_c / g of the link's
// consumption per unit of rate). A representative's flow thus gets, at each instant, the rate
// each of its class's n_c real flows gets, B / (the ranks whose flows are on the link then):
// exact whichever classes send at once. When every domain holds every class alike (a MoDa
// layout on supernodes) g = n and each flow counts once: one folded link per kind at B / n, the
// rule before weights, exact for symmetric patterns. A domain with a class of one among
// classes of many (a straggler, a rank beside a degraded link) is where weights matter: that
// class's flow counts once, the others' many times, where a single divisor (the largest class)
// gave every representative B / (largest n) / (classes), about B / (2 n) for two classes.
// Weights are bounded (kMaxFoldedWeight): beyond it the domain's counts are scaled by
// q = ceil(largest n / kMaxFoldedWeight), the link runs at B / q, and class c counts
// max(1, round(n_c / q)) times (an approximation within 1 / (2 kMaxFoldedWeight) for the large
// classes; a small class alone on the link gets B / q, more than its node's injection rate
// on the machines we model). A domain whose link runs at another fraction of its kind's
// bandwidth (Network::bandwidth_factor: a degraded uplink) folds only with domains whose link
// runs at the same fraction. A flow crossing a weighted domain that does not hold its class
// counts for its class's ranks in its own domain. A link with unequal weights carries no latency in SimGrid (a
// route lists it several times); PathMap moves its latency into the flow's delay.
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

// The bound on a representative's flow's weight on a folded link (see above).
constexpr int kMaxFoldedWeight = 64;

struct FoldedDomain {
  int instance = 0;  // the folded link standing for this domain
  double per = 1;    // the link's capacity divisor (g, or q beyond kMaxFoldedWeight; see fold_shared_links)
  double bandwidth_factor = 1;  // the domain's link's Network::bandwidth_factor
  bool weighted = false;        // some class's weight differs from 1
  int domains = 1;              // the real domains folded onto `instance`
  std::map<int, int> ranks_of_slot;  // representative's slot -> the ranks of its class here

  // How many times the flows of `slot` list this domain's folded link: 1 on an unweighted link;
  // on a weighted one its class's ranks here over `per`, or, for a class this domain does not
  // hold (a flow into the domain), `foreign_ranks` over `per` (the real flows of its class that
  // its flow stands for on one real link: PathMap::map_path), bounded by kMaxFoldedWeight.
  int weight(int slot, double foreign_ranks) const;
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
