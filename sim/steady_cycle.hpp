// Time folding when the steady state repeats over several iterations rather than one.
//
// A pipelined step folded in time simulates a few iterations (micro-batches) and extends the step
// by the steady spacing between consecutive iterations' ends. When several stages tie for the
// bottleneck (their per-iteration work within a tolerance), who sets the pace can rotate among
// them, and the spacing then repeats only every few iterations (a cycle), after a transient.
// These pure functions say whether stages tie and find such a cycle in a series of spacings, so
// that the step can be extended by the mean over whole cycles.
#pragma once
#include <vector>

namespace exasim {

// How many of the stages' per-iteration work (seconds, any order) lie within `tolerance`
// (relative) of the largest; 0 for no stages. A count above one is a tie for the bottleneck.
int tied_stages(const std::vector<double>& work_s, double tolerance);

struct SteadyCycle {
  int period = 0;             // iterations per cycle
  double mean_spacing_s = 0;  // mean spacing over the whole cycles measured
  int cycles = 0;             // whole cycles the mean spans
};

// The smallest period q in [1, max_period] such that each of the series' last `confirm` spacings
// agrees with the one q before it within `tolerance` (relative); the mean is taken over the
// longest tail of whole cycles inside the stretch that agrees (the last `confirm` + q spacings).
// Returns period 0 when no q agrees (the series is still in its transient, or too short:
// it needs confirm + q spacings).
SteadyCycle find_steady_cycle(const std::vector<double>& spacings_s, int max_period, int confirm, double tolerance);

}  // namespace exasim
