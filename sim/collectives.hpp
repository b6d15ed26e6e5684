// Collective algorithms: a collective among n members becomes, for each member, a
// sequence of steps of point-to-point flows. Step k of a member may start when its
// step k-1 sends are done and its step k-1 receives have arrived (sendrecv semantics).
#pragma once
#include <stdexcept>
#include <vector>

#include "sim/step_graph.hpp"

namespace exasim {

struct CollectiveStep {
  struct Send {
    int peer;      // member index in the group
    double bytes;
  };
  std::vector<Send> sends;
  std::vector<int> recv_from;  // member indices
};

class CollectiveSchedule {
 public:
  // Throws std::invalid_argument for a kind/algorithm pair that does not exist.
  CollectiveSchedule(CollectiveKind kind, CollectiveAlgorithm algorithm, int group_size, double bytes);

  int step_count() const { return steps_; }
  int group_size() const { return n_; }
  // Fills `out` with member `m`'s step `k` (0 <= k < step_count()).
  void step(int m, int k, CollectiveStep& out) const;
  // The textbook alpha-beta time on an uncongested network where every flow sees
  // latency alpha_s and bandwidth beta_Bps and a member sends one flow at a time.
  double alpha_beta_time_s(double alpha_s, double beta_Bps) const;

 private:
  CollectiveKind kind_;
  CollectiveAlgorithm algorithm_;
  int n_;
  double bytes_;
  int steps_ = 0;
};

}  // namespace exasim
