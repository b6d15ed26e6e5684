// What a simulated step's timeline says: where the time went and what was on the critical path.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "sim/engine.hpp"

namespace exasim {

// Each instant of a rank's step goes to one category: compute beats communication (what is
// left of communication is exposed); the optimizer phase (its update and its communication)
// is "optimizer".
struct Breakdown {
  double forward_compute_s = 0, forward_communication_s = 0;
  double backward_compute_s = 0, backward_communication_s = 0;
  double optimizer_s = 0, idle_s = 0;
  double total_s() const {
    return forward_compute_s + forward_communication_s + backward_compute_s + backward_communication_s +
           optimizer_s + idle_s;
  }
};
Breakdown breakdown_of(const StepGraph& g, const SimulatedRank& r);

struct CriticalItem {
  std::string label;
  std::string phase;
  bool compute = true;
  double seconds = 0;
};
// Walks back from the rank's last op through the latest-finishing predecessor; sums each
// op's time from ready to end by label; largest first.
std::vector<CriticalItem> critical_path(const StepGraph& g, const SimulatedRank& r);

// The simulated rank that finished last.
const SimulatedRank& slowest_rank(const SimResult& res);

}  // namespace exasim
