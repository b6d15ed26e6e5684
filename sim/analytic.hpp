// The analytic mode: a closed-form estimate of a step on the same step graphs the engine
// replays, for pruning a sweep before the simulated runs. One representative rank per
// program (the first rank that runs it); each op starts when its dependencies are done and
// lasts:
//  * a compute op: its cost-model time;
//  * a collective: its algorithm's textbook alpha-beta time (CollectiveSchedule), with alpha the
//    latency and beta the narrowest link of the path from the representative to its next
//    group member;
//  * a send: the path's latency plus bytes over its narrowest link; a receive: until the
//    matching send (same tag, from the member at -offset, whose program is replayed too) is done.
// No two flows contend for a link and shared links are not divided among the ranks that use
// them: the estimate is a lower bound of the simulated step on congested networks.
#pragma once
#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/network.hpp"
#include "sim/workload.hpp"

namespace exasim {

// Returns a SimResult with one SimulatedRank per program (multiplicity: the ranks running
// it) and no SimGrid statistics. Throws std::runtime_error when a receive has no send.
SimResult estimate_step(const Workload& w, const Network& net, const CostModel& cost);

}  // namespace exasim
