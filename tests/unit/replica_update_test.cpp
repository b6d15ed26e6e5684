// Every core a replica (a TPU v3 chip's two TensorCores): without weight-update sharding each core
// updates its own copy of the replicated weights (CrossShardOptimizer / OptimizerV2 under
// TPUStrategy), so a device of `cores` cores streams the update `cores` times; under weight-update
// sharding the device's share is params / replicas whatever its cores. By hand: Adam's kernel reads
// w, g, m, v and writes w, m, v, 7 fp32 values (28 bytes) a parameter.
#include <doctest/doctest.h>

#include <string>
#include <variant>

#include "models/convnet.hpp"
#include "models/transformer.hpp"
#include "models/transformer_parameters.hpp"
#include "tests/unit/approx.hpp"
#include "tests/unit/small_scenario.hpp"

using namespace exasim;

namespace {

// The bytes of rank 0's ops labelled `label` (summed).
double bytes_of(const StepGraph& g, const std::string& label) {
  double bytes = 0;
  for (auto v : boost::make_iterator_range(boost::vertices(g)))
    if (const auto* c = std::get_if<ComputeWork>(&g[v].work); c && g[v].label == label) bytes += c->bytes;
  return bytes;
}

// BERT-Large in fp32 (no master-weight passes) on 4 data-parallel devices of `cores` cores.
double bert_adam_bytes(int cores, int zero_stage) {
  TrainingSpec t;
  t.seq_len = 128;
  t.precision = PrecisionPolicy::fp32;
  ParallelPlan p;
  p.data = 4;
  p.micro_batch = 2;
  p.global_batch = 8;
  p.zero_stage = zero_stage;
  return bytes_of(build_transformer_workload(test::bert_large(), t, p, cores).workload.programs.at(0), "adam");
}

}  // namespace

TEST_CASE("replicated update: each of a device's cores updates its own copy unless the update is sharded") {
  const double n = transformer_parameters(test::bert_large(), 128);
  CHECK(bert_adam_bytes(1, 0) == test::rel(28 * n, 1e-12));
  CHECK(bert_adam_bytes(2, 0) == test::rel(2 * 28 * n, 1e-12));  // two TensorCores, two copies
  // weight-update sharding over the 4 devices' 8 cores: a device updates 2 slices of n / 8
  CHECK(bert_adam_bytes(2, 1) == test::rel(28 * n / 4, 1e-12));
  CHECK(bert_adam_bytes(1, 1) == test::rel(28 * n / 4, 1e-12));
}

TEST_CASE("replicated update: ResNet-50's momentum update on a chip's two cores") {
  const double n = 25557032;  // ResNet-50's parameters
  ParallelPlan plan;
  plan.data = 4;
  plan.micro_batch = 64;
  plan.global_batch = 256;
  ConvNetSpec resnet50;
  resnet50.stage_blocks = {3, 4, 6, 3};
  const auto adam_bytes = [&](int cores) {
    const ConvNetWorkload w = build_convnet_workload(resnet50, PrecisionPolicy::fp16, plan, ConvNetDevice{cores});
    return bytes_of(w.workload.programs.at(0), "weight_update");
  };
  CHECK(adam_bytes(1) == test::rel(28 * n, 1e-12));
  CHECK(adam_bytes(2) == test::rel(2 * 28 * n, 1e-12));
  plan.zero_stage = 1;  // sharded: a device's share, n / 4, whatever its cores
  CHECK(adam_bytes(2) == test::rel(28 * n / 4, 1e-12));
}
