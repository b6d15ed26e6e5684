// From a scenario to a prediction: machine -> network, model + plan -> workload, engine run,
// then the report's figures. Used by `run` and `validate`.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/scenario.hpp"
#include "models/moe_transformer.hpp"
#include "sim/analysis.hpp"
#include "sim/engine.hpp"

namespace exasim {

struct Prediction {
  Scenario scenario;
  MoeWorkload workload;
  SimResult sim;
  Breakdown breakdown;
  std::vector<CriticalItem> critical;
  std::string cost_model;
  double step_time_s = 0;
  double executed_flops = 0;
  double model_flops = 0;
  double sustained_pflops = 0;
  double model_pflops = 0;
  double tokens_per_s = 0;
};

// Throws ScenarioError, DoesNotFitError or std::runtime_error (engine).
Prediction predict(const Scenario& sc);

nlohmann::json report_json(const Prediction& p);
std::string summary_text(const Prediction& p);

}  // namespace exasim
