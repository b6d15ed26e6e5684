// The formula tier of a plan search (issue 17): a dense transformer's training step under a general
// parallel plan, in closed form per plan, without building the plan's step graphs.
//
// What it shares with the analytic estimate (sim/analytic.hpp): the ops themselves and their costs.
// Once per distinct layer shape (everything but the pipeline, data-parallel and batch shape of the
// plan: the `shape_key` the caller gives), two probe workloads are built by the same builder
// (models/transformer.hpp: the plan with 2 pipeline stages, 1 data-parallel replica, ZeRO 0 and one
// micro-batch, of 1 and of 2 layers per stage) and timed by estimate_step; their differences give
// one layer's forward and backward (with recomputation and the tensor-parallel collectives), the
// first chunk's embedding, the last chunk's head, the receive's tensor all-gather, the optimizer's
// seconds per parameter, and the flops. Per plan, with the machine's placement of its groups
// (place_plan; remembered per pipeline and data-parallel size) and AlphaBetaCosts:
//  * each model chunk's forward and backward item: n layers, the embedding or the head, the
//    receive's all-gather, ZeRO 3's per-layer parameter all-gathers over "dp";
//  * the pipeline schedule (models/pipeline_schedule.hpp: GPipe, 1F1B, interleaved) over those items,
//    each item starting when its device is free and its input has arrived (the sender's item end
//    plus the point-to-point send between the two stages' ranks): the bubble and the sends, as a
//    recurrence over the p x m x v items (O(p m v), no graph) rather than Megatron's bubble fraction,
//    which holds for equal stages and free messages only (with a send of c seconds the steady 1F1B
//    period is F + B + c; the last stage's head makes stages unequal);
//  * per stage after its last item and send: the gradient all-reduce (ZeRO 0) or reduce-scatter
//    over "dp", the optimizer on the stage's (ZeRO-sharded) parameters, ZeRO 1/2's parameter
//    all-gather; the step is the last stage to finish.
// The breakdown is the slowest stage's, counted as the graph's breakdown_of counts it: its items'
// compute and exposed communication by phase, its receive waits as communication of the receiving
// item's phase except where a forward send is still in flight (forward communication comes first),
// the gradient reduction as backward communication, the update and its gather as optimizer, the
// rest idle. Out of scope (FormulaScopeError; the sweep estimates those plans on the graphs): MoE models,
// encoder-decoder models, context parallelism, grad_sync overlap, ZeRO 3 prefetch, fp8, supernode
// (hierarchical) reductions.
#pragma once
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/parallel_plan.hpp"
#include "models/pipeline_schedule.hpp"
#include "models/transformer.hpp"
#include "sim/analysis.hpp"
#include "sim/analytic.hpp"
#include "sim/network.hpp"

namespace exasim {

class FormulaScopeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct FormulaEstimate {
  double step_time_s = 0;
  Breakdown breakdown;  // the slowest stage's
  int slowest_stage = 0;
  double executed_flops = 0, model_flops = 0;  // all ranks, the whole step
};

// One layer shape's probe results (see above), seconds per device and flops per rank.
struct LayerShapeCosts {
  double layer_forward_s = 0, layer_backward_s = 0;            // one layer, one micro-batch
  double layer_forward_compute_s = 0, layer_backward_compute_s = 0;
  double embedding_forward_s = 0, embedding_backward_s = 0;    // the first chunk's extra
  double embedding_forward_compute_s = 0, embedding_backward_compute_s = 0;
  double head_forward_s = 0, head_backward_s = 0;              // the last chunk's extra
  double head_forward_compute_s = 0, head_backward_compute_s = 0;
  double receive_forward_s = 0, receive_backward_s = 0;        // the receive's all-gather (1-D)
  // The update's kernels as the probe ran them on `update_parameters` (each re-costed per plan on
  // its stage's shard: their work and element count scale with it), and the rest of the tail (a
  // 2.5-D depth all-reduce), affine in the updated parameters.
  std::vector<ComputeWork> update_works;
  double update_parameters = 0;
  double optimizer_base_s = 0, optimizer_s_per_parameter = 0;
  double message_bytes = 0;                                    // one pipeline message
  double layer_flops = 0, embedding_flops = 0, head_flops = 0;  // executed, per micro-batch
  double layer_model_flops = 0, embedding_model_flops = 0, head_model_flops = 0;
  double optimizer_base_flops = 0, optimizer_flops_per_parameter = 0;
};

class PlanFormula {
 public:
  // `adopt`: the machine family's collectives applied to a workload (adopt_family_collectives), so
  // that the probes and the placements run the algorithms the analytic estimate sees.
  PlanFormula(const Network& net, const CostModel& cost, std::function<void(Workload&)> adopt, int cores_per_device,
              WorkloadBuild build)
      : net_(net), cost_(cost), adopt_(std::move(adopt)), cores_(cores_per_device), build_(build) {}

  // `shape_key`: a text equal for two plans exactly when they differ at most in pipeline_parallel,
  // virtual_stages, schedule, data_parallel (devices), global_batch and zero_stage. Throws
  // FormulaScopeError for a plan out of scope, std::invalid_argument as the builder does.
  FormulaEstimate estimate(const std::string& shape_key, const ModelSpec& model, const TrainingSpec& training,
                           const ParallelPlan& plan);

  // The probes' results of the plan's shape (built on first use).
  const LayerShapeCosts& shape(const std::string& shape_key, const ModelSpec& model, const TrainingSpec& training,
                               const ParallelPlan& plan);

  struct Placed;  // one pipeline x data-parallel placement's groups and costs
  struct PipelineEnds;  // a schedule's per-stage ends (plan_formula.cpp)

 private:
  const Network& net_;
  const CostModel& cost_;
  std::function<void(Workload&)> adopt_;
  int cores_ = 1;
  WorkloadBuild build_;
  std::map<std::string, LayerShapeCosts> shapes_;
  std::map<std::string, std::shared_ptr<Placed>> placements_;
  // Per (schedule, pipeline, micro-batches, virtual stages): each stage's pipeline_order, shared by
  // the plans that differ only in their layer shape, data-parallel size or ZeRO stage.
  std::map<std::array<int, 4>, std::vector<std::vector<PipelineItem>>> orders_;
  // The schedule's ends per exact input (schedule, p, m, v, the items' and sends' seconds).
  std::map<std::vector<double>, std::shared_ptr<const PipelineEnds>> schedule_ends_;
  Placed& placed(const std::string& key, const ParallelPlan& plan);
  const std::vector<std::vector<PipelineItem>>& orders(const ParallelPlan& plan);
};

// Throws FormulaScopeError naming what puts the plan out of the formula's scope.
void check_formula_scope(const ModelSpec& model, const TrainingSpec& training, const ParallelPlan& plan);

}  // namespace exasim
