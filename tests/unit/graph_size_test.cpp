// The step graph's size is estimated before it is built (models/graph_size.hpp): the estimate bounds
// every built program's ops from above without being loose by more than a small factor, every
// shipped scenario and sweep plan stays far below the default limit, and a plan past the limit is
// refused with the estimate before anything is built.
#include <doctest/doctest.h>

#include <algorithm>
#include <initializer_list>
#include <set>
#include <nlohmann/json.hpp>
#include <string>

#include "app/embedded.hpp"
#include "app/pipeline.hpp"
#include "app/profiles.hpp"
#include "app/scenario.hpp"
#include "app/sweep.hpp"
#include "models/graph_size.hpp"
#include "tests/unit/approx.hpp"

using namespace exasim;
using json = nlohmann::json;

namespace {

double longest_program_ops(const Workload& w) {
  double most = 0;
  for (const StepGraph& g : w.programs) most = std::max(most, double(boost::num_vertices(g)));
  return most;
}

PredictOptions memory_only() {
  PredictOptions o;
  o.memory_only = true;  // builds the step graphs, simulates nothing
  o.host = std::make_shared<ProfileEfficiency>(load_host_profile(""));
  return o;
}

// Built ops <= the estimate <= 8 x built ops, and far below the default limit.
void check_estimate(const Scenario& sc, const PredictOptions& o) {
  const GraphSizeEstimate e = sc.plan_kind == Scenario::PlanKind::moda
                                  ? estimate_graph_size(sc.model, sc.training, sc.plan)
                                  : estimate_graph_size(sc.model, sc.training, sc.parallel);
  const Prediction p = predict(sc, o);
  const double built = longest_program_ops(p.workload);
  CHECK(built <= e.ops_per_rank);
  CHECK(e.ops_per_rank <= 8 * built);
  CHECK(e.ranks == test::rel(p.ranks));
  CHECK(e.ops_x_ranks() * 10 <= kDefaultMaxGraphOps);
}

// Every shipped scenario under one of `folders` (scenarios/ itself is ""), each checked as above;
// returns how many were checked. The shipped scenarios are split over three test cases so that each
// stays well inside the unit tests' time limit under the sanitizers.
int check_shipped_scenarios(std::initializer_list<const char*> folders) {
  const PredictOptions o = memory_only();
  int scenarios = 0;
  for (const auto& file : embedded_files()) {
    // References, not structured bindings: INFO's lambda may not capture those before C++20 (clang).
    const std::string& path = file.first;
    const std::string& text = file.second;
    if (path.rfind("scenarios/", 0) != 0) continue;
    const std::string rest = path.substr(std::string("scenarios/").size());
    const std::string folder = rest.find('/') == std::string::npos ? "" : rest.substr(0, rest.find('/'));
    if (std::find(folders.begin(), folders.end(), folder) == folders.end()) continue;
    INFO("scenario ", path);
    check_estimate(parse_scenario(text, path), o);
    ++scenarios;
  }
  return scenarios;
}

}  // namespace

TEST_CASE("graph size: the estimate bounds the shipped Sunway scenarios' programs, far below the limit") {
  CHECK(check_shipped_scenarios({"", "mapping", "weak-scaling", "resilience"}) >= 20);
}

TEST_CASE("graph size: the estimate bounds the shipped GPU scenarios' programs, far below the limit") {
  CHECK(check_shipped_scenarios({"megatron", "korthikanti", "tensor3d", "zero", "offload", "a100"}) >= 15);
}

TEST_CASE("graph size: the estimate bounds the shipped TPU scenarios' programs, far below the limit") {
  CHECK(check_shipped_scenarios({"tpu"}) >= 5);
}

TEST_CASE("graph size: every shipped scenario folder is checked by one of the cases above") {
  // A new folder of scenarios must join one of the three cases (sweeps and validation have their own).
  const std::set<std::string> known = {"", "mapping", "weak-scaling", "resilience", "megatron", "korthikanti",
                                       "tensor3d", "zero", "offload", "a100", "tpu", "sweeps", "validation"};
  for (const auto& file : embedded_files()) {
    const std::string& path = file.first;
    if (path.rfind("scenarios/", 0) != 0) continue;
    const std::string rest = path.substr(std::string("scenarios/").size());
    const std::string folder = rest.find('/') == std::string::npos ? "" : rest.substr(0, rest.find('/'));
    INFO("scenario ", path);
    CHECK(known.count(folder) == 1);
  }
}

TEST_CASE("graph size: every plan of the shipped sweeps stays far below the limit") {
  for (const auto& file : embedded_files()) {
    const std::string& path = file.first;
    const std::string& text = file.second;
    if (path.rfind("scenarios/sweeps/", 0) != 0) continue;
    const SweepSpec s = parse_sweep(text, path);
    for (size_t plan = 0; plan < s.plan_count(); ++plan) {
      INFO(path, " plan ", plan);
      Scenario sc;
      try {
        sc = parse_scenario(plan_scenario(s, plan).dump(), path);
      } catch (const ScenarioError&) {
        continue;  // an invalid plan is refused before its size matters
      }
      const GraphSizeEstimate e = sc.plan_kind == Scenario::PlanKind::moda
                                      ? estimate_graph_size(sc.model, sc.training, sc.plan)
                                      : estimate_graph_size(sc.model, sc.training, sc.parallel);
      CHECK(e.ops_x_ranks() * 10 <= kDefaultMaxGraphOps);
    }
  }
}

TEST_CASE("graph size: recomputed, interleaved, tensor-parallel and MoE plans are bounded too") {
  const PredictOptions o = memory_only();
  const char* plans[] = {
      R"({"data_parallel": 2, "tensor_parallel": 2, "pipeline_parallel": 2, "micro_batch": 1, "global_batch": 8,
          "recompute": "full"})",
      R"({"data_parallel": 1, "pipeline_parallel": 2, "virtual_stages": 2, "micro_batch": 1, "global_batch": 4,
          "recompute": "selective", "zero_stage": 3})",
      R"({"data_parallel": 1, "tensor_parallel": 8, "tensor_mode": "3d", "micro_batch": 4, "global_batch": 4})",
      R"({"data_parallel": 1, "tensor_parallel": 4, "tensor_mode": "2d", "pipeline_parallel": 2, "schedule": "gpipe",
          "micro_batch": 2, "global_batch": 8})"};
  for (const char* plan : plans) {
    INFO(std::string(plan));
    json j = json::parse(R"({"name": "g", "machine": "selene-dgx-a100",
      "model": {"name": "gpt", "layers": 8, "d_model": 256, "heads": 8, "d_ff": 1024, "vocab": 1024},
      "training": {"seq_len": 128, "precision": "fp16"}})");
    j["plan"] = json::parse(plan);
    check_estimate(parse_scenario(j.dump(), "g.json"), o);
  }
  json moe = json::parse(R"({"name": "m", "machine": "selene-dgx-a100",
    "model": {"name": "moe", "layers": 4, "d_model": 256, "heads": 8, "d_ff": 1024, "vocab": 1024,
              "experts_per_layer": 8, "top_k": 2, "capacity_factor": 0},
    "training": {"seq_len": 128, "precision": "fp16"},
    "plan": {"data_parallel": 8, "expert_parallel": 8, "pipeline_parallel": 2, "micro_batch": 1, "global_batch": 32}})");
  check_estimate(parse_scenario(moe.dump(), "m.json"), o);
}

TEST_CASE("graph size: a plan past the limit is refused with its estimate before it is built") {
  json j = json::parse(R"({"name": "deep", "machine": "selene-dgx-a100",
    "model": {"name": "deep", "layers": 2147483647, "d_model": 256, "heads": 4, "d_ff": 1024, "vocab": 1024},
    "training": {"seq_len": 128, "precision": "fp16"},
    "plan": {"data_parallel": 8, "micro_batch": 1, "global_batch": 8}})");
  const Scenario sc = parse_scenario(j.dump(), "deep.json");
  PredictOptions o = memory_only();
  try {
    (void)predict(sc, o);
    FAIL("no error");
  } catch (const ScenarioError& e) {
    CHECK(e.json_path() == "/plan");
    CHECK(e.expected().find("ops x ranks") != std::string::npos);
    CHECK(e.expected().find("--max-graph-ops") != std::string::npos);
  }
  // The limit is a parameter: a tiny plan passes under the default and is refused under 100.
  j["model"]["layers"] = 2;
  const Scenario small = parse_scenario(j.dump(), "small.json");
  CHECK_NOTHROW((void)predict(small, o));
  o.max_graph_ops = 100;
  CHECK_THROWS_AS((void)predict(small, o), ScenarioError);
}
