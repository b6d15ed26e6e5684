// The engine: replays one training step of a workload on a SimGrid platform built from
// a Network, and returns when each op of each simulated rank started and ended.
// This is the only place that talks to SimGrid.
#pragma once
#include <string>
#include <vector>

#include "sim/cost_model.hpp"
#include "sim/network.hpp"
#include "sim/workload.hpp"

namespace exasim {

enum class Fidelity { folded, exhaustive };
const char* to_string(Fidelity f);

struct EngineOptions {
  Fidelity fidelity = Fidelity::folded;
};

struct OpTiming {
  double ready_s = 0;  // all predecessors done
  double end_s = 0;    // done on this rank
};

struct SimulatedRank {
  int rank = 0;
  int multiplicity = 1;  // how many real ranks it stands for
  std::vector<OpTiming> ops;  // indexed by op id
};

struct SimStats {
  long simulated_ranks = 0;
  long flows = 0;          // SimGrid communications
  long compute_activities = 0;  // one SimGrid exec per compute unit, or one timer per task
                                // when a rank's compute ops form a chain (see engine.cpp)
  long delay_activities = 0;    // flow latency delays (kernel timers)
  long links = 0;
  long hosts = 0;
  long routes = 0;
};

struct SimResult {
  double step_time_s = 0;
  std::vector<SimulatedRank> ranks;
  SimStats stats;
  Fidelity fidelity = Fidelity::folded;
};

// Throws std::runtime_error with a clear message when folding's preconditions fail or the
// graph cannot complete. Run one simulation per process (SimGrid keeps global state).
SimResult simulate(const Workload& w, const Network& net, const CostModel& cost, const EngineOptions& opt);

}  // namespace exasim
