// The closed-form stage of a sweep, in the sweep's own process: the base scenario, the machine
// files and the host profile are parsed once (SweepSpec, PredictOptions), and each plan's
// analytic estimate (sim/analytic.hpp) runs in memory on one step graph per class of ranks
// that behave alike (the folded workload). A plan that the memory model alone rules out is
// refused before its graphs are built (app/pipeline.cpp). Rows are the ones a per-plan process
// writes (app/sweep.hpp): same fields, same numbers.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "app/sweep.hpp"

namespace exasim {

// A plan's row: its scenario parsed from the base with the plan's values ("invalid" with the
// reason when it cannot be), then predict() (simulated or analytic as `po` says): "ok" with the
// figures, "infeasible" (does not fit), "invalid" or "error". Never throws for a plan's problem.
ojson predict_row(const SweepSpec& s, size_t plan, const PredictOptions& po);
// The same for a scenario already parsed. leave_to_exit: for a forked child that _exits once the
// row is written; the prediction (a simulated plan's step graphs, e.g. 16 programs of about 16,000
// ops) is kept until the process ends instead of freed op by op (the last one made is kept: a
// process that makes rows this way must make no other).
ojson predict_row(const SweepSpec& s, size_t plan, const Scenario& sc, const PredictOptions& po,
                  bool leave_to_exit = false);
// The plan's row from the formula tier (mode "formula"); a plan out of the formula's scope gets
// predict_row's (po: the analytic estimate's options).
// doc: the plan's scenario document (plan_scenario_or_row's), not built again.
ojson formula_row(const SweepSpec& s, size_t plan, const Scenario& sc, const nlohmann::json& doc, FormulaTier& tier,
                  const PredictOptions& po);

// The scenario of a plan, or the "invalid" row that says why there is none (pruned: never run).
// The scenario is parsed from the document in memory (no text written and read back); doc, when
// given, receives that document.
bool plan_scenario_or_row(const SweepSpec& s, size_t plan, Scenario& sc, ojson& invalid_row,
                          nlohmann::json* doc = nullptr);

// A sweep file's "search" (instead of "dimensions"): the best plan under constraints over every
// valid combination of tensor_parallel, pipeline_parallel, virtual_stages, micro_batch,
// recompute and zero_stage, as Calculon's optimal-execution search does, without listing them:
//   "search": {"devices": 1024, "global_batch": 1536, "memory_headroom": 0.1, "top": 10,
//              "tensor_parallel": [1, 2, 4, 8], ...}
// devices and global_batch default to the base scenario's; memory_headroom (default 0) is the
// fraction of each device's memory a plan must leave free; top (default 10) the plans the summary
// lists with their step-time breakdown. A list given for one of the six plan keys replaces its
// default candidates: tensor 1, 2, 4, 8; pipeline the powers of two up to 128; virtual stages
// 1, 2, 4; micro-batch 1, 2, 4, 8; recompute none, selective, full; ZeRO 0 to 3. A combination is
// kept when its data-parallel size is whole, the scenario reader and the model accept it, and the
// memory model (no step graph) leaves the headroom free. The kept plans become the sweep's plans:
// one free dimension (/plan/tensor_parallel) and the others linked to it, so that sharding,
// --resume and --merge work as for a grid. Throws ScenarioError (file, /search/...) for a bad
// search or when no combination is kept.
void expand_search(SweepSpec& s, const ojson& search, const std::string& file);

}  // namespace exasim
