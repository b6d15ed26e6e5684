// Goodput: the expected fraction of wall time that trains, once failures, checkpoints and
// restarts are counted (a scenario's "resilience" block).
//
// The job is interrupted when any of its components fails; components fail independently with
// exponentially distributed lifetimes, so the job's mean time to interrupt is
//   M = 1 / (nodes / MTBF_node + links / MTBF_link + switches / MTBF_switch)
// (topologies/faults.hpp counts a job's nodes, links and switches per machine family).
// The job writes a checkpoint (every parameter's working copy and optimizer state, once:
// checkpoint_state_bytes) every tau seconds of computation; writing it takes
// delta = checkpoint bytes / the file system's write bandwidth; after a failure it restarts
// (R seconds) from the last checkpoint and recomputes what was lost.
//
// Daly's model (J. T. Daly, "A higher order estimate of the optimum checkpoint interval for
// restart dumps", Future Generation Computer Systems 22 (2006) 303-312): for exponential
// (Poisson) failures the expected wall
// time of T_s seconds of solve time is
//   T_w = M e^{R/M} (e^{(tau + delta)/M} - 1) T_s / tau,
// so goodput = T_s / T_w = tau / (M e^{R/M} (e^{(tau + delta)/M} - 1)).
// Its optimum interval, Daly's perturbation solution (his Figs. 3-5: M = 24 h, 6 h, 15 min with
// delta = 5 min give 117, 57 and 9.1 min; tests/unit/goodput_test.cpp):
//   tau_opt = sqrt(2 delta M) [1 + sqrt(delta / (2M)) / 3 + (delta / (2M)) / 9] - delta   (delta < 2M)
//   tau_opt = M                                                                      (delta >= 2M)
// whose first-order term is Young's sqrt(2 delta M) (J. W. Young, CACM 17 (1974) 530-531).
// A checkpoint is taken between steps: the interval is rounded to a whole number of steps (at
// least one).
#pragma once

#include "sim/job_components.hpp"

namespace exasim {

// A scenario's "resilience" block (app/scenario.cpp); times in seconds; an MTBF of 0: that
// kind of component never fails.
struct ResilienceSpec {
  double node_mtbf_s = 0;   // required (> 0)
  double link_mtbf_s = 0;
  double switch_mtbf_s = 0;
  double restart_s = 0;              // from the interrupt to computing again (excl. lost work)
  double checkpoint_interval_s = 0;  // computation between checkpoints; 0: Daly's optimum
};

struct GoodputResult {
  double mtti_s = 0;              // M
  double checkpoint_bytes = 0;
  double checkpoint_write_s = 0;  // delta
  double restart_s = 0;           // R
  double young_interval_s = 0;    // sqrt(2 delta M)
  double daly_interval_s = 0;     // Daly's higher-order optimum
  bool interval_given = false;
  double interval_steps = 0;      // steps between checkpoints
  double interval_s = 0;          // tau: interval_steps x step time
  double goodput = 0;             // T_s / T_w
};

// Young's first-order optimum, sqrt(2 delta M).
double young_interval_s(double delta_s, double mtti_s);
// Daly's higher-order optimum (above).
double daly_interval_s(double delta_s, double mtti_s);
// Daly's goodput for interval tau (above).
double daly_goodput(double tau_s, double delta_s, double restart_s, double mtti_s);
// M from the components and the MTBFs (an MTBF of 0 contributes nothing). Throws
// std::invalid_argument when nothing can fail (node_mtbf_s 0).
double job_mtti_s(const JobComponents& c, const ResilienceSpec& r);

// The whole model: checkpoint_bytes written at write_Bps, the step's time, the spec's interval or
// Daly's optimum rounded to whole steps.
GoodputResult expected_goodput(const ResilienceSpec& r, const JobComponents& c, double checkpoint_bytes,
                               double write_Bps, double step_time_s);

}  // namespace exasim
