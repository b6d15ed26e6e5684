// Megatron-LM's mixed-precision optimizer step (models/transformer.cpp main_grad_update): the
// passes around Adam and their bytes per parameter, by hand, for the fp16, bf16 and fp32 rows.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <variant>

#include "models/graph_builder.hpp"
#include "models/transformer.hpp"

using namespace exasim;

namespace {

ModelSpec small_gpt() {
  ModelSpec m;
  m.name = "gpt-opt";
  m.layers = 2;
  m.d_model = 256;
  m.heads = 4;
  m.d_ff = 1024;
  m.vocab = 512;
  return m;
}

// Bytes of each optimizer-phase compute op by label (each label appears once: one replica, no ZeRO).
std::map<std::string, double> optimizer_bytes(PrecisionPolicy precision) {
  TrainingSpec t;
  t.seq_len = 128;
  t.precision = precision;
  ParallelPlan p;
  p.micro_batch = 1;
  p.global_batch = 1;
  const TransformerWorkload tw = build_transformer_workload(small_gpt(), t, p);
  const StepGraph& g = tw.workload.programs.at(0);
  std::map<std::string, double> out;
  for (auto v : boost::make_iterator_range(boost::vertices(g)))
    if (const auto* c = std::get_if<ComputeWork>(&g[v].work))
      if (g[v].phase == Phase::optimizer) {
        CHECK(out.count(g[v].label) == 0);
        out[g[v].label] = c->bytes;
      }
  return out;
}

}  // namespace

TEST_CASE("optimizer step: Megatron's fp16 passes around Adam, bytes per parameter by hand") {
  const auto ops = optimizer_bytes(PrecisionPolicy::fp16);
  REQUIRE(ops.count("dense_adam") == 1);
  const double n = ops.at("dense_adam") / 28;  // Adam: 4 reads and 3 writes of 4 bytes per parameter
  REQUIRE(n > 0);
  CHECK(ops.at("dense_main_grad") == doctest::Approx(6 * n));        // half gradient read, fp32 written
  CHECK(ops.at("dense_unscale") == doctest::Approx(8 * n));          // fp32 read and written (grad scaler)
  CHECK(ops.at("dense_grad_norm") == doctest::Approx(4 * n));        // fp32 read once
  CHECK(ops.at("dense_master_to_model") == doctest::Approx(6 * n));  // fp32 master read, half weight written
  CHECK(ops.at("dense_zero_grad") == doctest::Approx(2 * n));        // half gradient buffer written
  CHECK(ops.size() == 6);
}

TEST_CASE("optimizer step: bf16 has no grad scaler, fp32 only Adam") {
  const auto bf16 = optimizer_bytes(PrecisionPolicy::bf16);
  CHECK(bf16.count("dense_unscale") == 0);
  CHECK(bf16.count("dense_grad_norm") == 1);
  CHECK(bf16.size() == 5);
  const auto fp32 = optimizer_bytes(PrecisionPolicy::fp32);
  CHECK(fp32.size() == 1);
  CHECK(fp32.count("adam") == 1);
}
