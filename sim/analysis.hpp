// What a simulated step's timeline says: where the time went and what was on the critical path.
#pragma once
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "sim/cost_model.hpp"
#include "sim/engine.hpp"

namespace exasim {

// Every function that takes a StepGraph and a SimulatedRank reads the rank's timings against
// the rank's own program: pass w.program(r.rank) (= w.programs[r.program]); a program whose op
// count differs from the rank's timings throws std::invalid_argument.

// A timeline that repeats: the instants in (from_s, to_s] count 1 + `times` times (a step whose
// steady state was simulated for fewer periods than it runs: the functions below then describe
// the whole step, as if the window had been replayed `times` more times; the default: no repeat).
struct TimeRepeat {
  double from_s = 0, to_s = 0;
  double times = 0;
  // The weighted length of [a, b].
  double weighted(double a, double b) const {
    return (b - a) + times * std::max(0.0, std::min(b, to_s) - std::max(a, from_s));
  }
};

// Each instant of a rank's step goes to one category: compute beats communication (what is
// left of communication is exposed; collectives and point-to-point transfers are
// communication); the optimizer phase (its update and its communication)
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
Breakdown breakdown_of(const StepGraph& g, const SimulatedRank& r, const TimeRepeat& repeat = {});

// The same timeline by kind of work: "compute", each collective kind ("all_reduce",
// "reduce_scatter", "all_gather", "all_to_all"), "point_to_point" and "idle"; an instant goes to
// compute first, then to the kinds in that order (what a kind keeps is the time it alone was
// exposed). The seconds sum to the rank's step.
struct KindShare {
  std::string kind;
  double seconds = 0;
};
std::vector<KindShare> breakdown_by_kind(const StepGraph& g, const SimulatedRank& r, const TimeRepeat& repeat = {});

struct CriticalItem {
  std::string label;
  std::string phase;
  bool compute = true;
  double seconds = 0;
};
// Walks back from the rank's last op through the latest-finishing predecessor; sums each
// op's time from ready to end by label; largest first.
std::vector<CriticalItem> critical_path(const StepGraph& g, const SimulatedRank& r, const TimeRepeat& repeat = {});

// One program's compute per kernel class (one rank's: pass its program), as the cost model costs it: the time, the work, and the
// mean efficiency against the device's class peak (GEMMs: flops over time x peak flop/s of
// their precision; the others: bytes over time x the class bandwidth).
struct KernelClassUse {
  KernelClass kernel_class = KernelClass::gemm;
  double time_s = 0, flops = 0, bytes = 0;
  double mean_efficiency = 0;
};
// Ops [0, repeated_end) count `repeats` times each (a program that holds some of the step's
// identical repetitions, e.g. micro-batches, stands for all of them).
std::vector<KernelClassUse> compute_by_kernel_class(const StepGraph& g, const CostModel& cost,
                                                    const DeviceProfile& device, OpId repeated_end = 0,
                                                    double repeats = 1);

// The simulated rank that finished last.
const SimulatedRank& slowest_rank(const SimResult& res);

}  // namespace exasim
