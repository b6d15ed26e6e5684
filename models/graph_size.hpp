// How large a step graph a plan builds, estimated from the model and plan alone, before anything
// is built: a plan of 10^9 ranks or 2^31 layers is refused at once (exit 2, with the estimate)
// instead of running out of memory after minutes. The size is ops per rank x ranks: what the
// engine expands at exhaustive fidelity, and what bounds the placement's and groups' tables.
#pragma once
#include "models/moe_spec.hpp"
#include "models/parallel_plan.hpp"

namespace exasim {

struct GraphSizeEstimate {
  double ops_per_rank = 0;  // an upper bound of the longest program's ops
  double ranks = 0;
  double ops_x_ranks() const { return ops_per_rank * ranks; }
};

// The default limit on ops x ranks (`exasim run --max-graph-ops` raises it). The largest shipped
// plans stay two orders of magnitude below it (tests/unit/graph_size_test.cpp).
inline constexpr double kDefaultMaxGraphOps = 2e10;

// General plans (models/transformer.hpp) and BaGuaLu's MoDa layouts (models/moda_placement.hpp).
// All arithmetic in double: no count overflows, whatever the sizes.
GraphSizeEstimate estimate_graph_size(const ModelSpec& m, const TrainingSpec& t, const ParallelPlan& plan);
GraphSizeEstimate estimate_graph_size(const ModelSpec& m, const TrainingSpec& t, const PlanSpec& plan);

}  // namespace exasim
