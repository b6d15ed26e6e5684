// A scenario file parsed and validated into plain value types. Nothing downstream reads JSON.
//
// Any numeric value in a scenario may be written plainly (a value its source states) or as
//   {"value": 128, "assumption": "one-line reason"}             -- a value nobody published
//   {"value": 16e9, "source": "...", "fitted_on": "case id"}   -- a free parameter
// Both forms are recorded in Scenario::annotations so that reports can list them.
#pragma once
#include <map>
#include <optional>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/goodput.hpp"
#include "models/moe_spec.hpp"
#include "models/parallel_plan.hpp"
#include "sim/engine.hpp"
#include "sim/step_graph.hpp"
#include "topologies/faults.hpp"
#include "topologies/machine_spec.hpp"

namespace exasim {

// JSON Pointer (RFC 6901) escaping of one reference token: "~" -> "~0", "/" -> "~1".
std::string escape_token(const std::string& key);

// Bad input: names the file, the JSON path (e.g. "/plan/nodes") and what was expected.
class ScenarioError : public std::runtime_error {
 public:
  ScenarioError(std::string file, std::string json_path, std::string expected);
  const std::string& file() const { return file_; }
  const std::string& json_path() const { return path_; }
  const std::string& expected() const { return expected_; }

 private:
  std::string file_, path_, expected_;
};

struct Annotation {
  std::string json_path;   // where the value sits, e.g. "/training/seq_len"
  nlohmann::json value;     // the number or string it annotates
  std::string kind;        // "assumption" or "free_parameter"
  std::string reason;      // assumption: the reason; free parameter: its source
  std::string fitted_on;   // free parameter: the one case it is fitted on ("" if none)
};

struct Scenario {
  std::string file;  // where it came from ("<embedded>/..." for built-in ones)
  std::string name;
  std::string description;
  MachineSpec machine;
  ModelSpec model;
  TrainingSpec training;
  // A plan is either BaGuaLu's MoDa layout family ("layout": "moda" | "inverse", read into
  // `plan`) or a general parallel plan (data/tensor/pipeline..., read into `parallel`).
  enum class PlanKind { moda, general };
  PlanKind plan_kind = PlanKind::moda;
  PlanSpec plan;
  ParallelPlan parallel;
  Fidelity fidelity = Fidelity::folded;
  // "engine": {"every_micro_batch": true}: a pipelined plan's step is simulated micro-batch by
  // micro-batch even when folded (no steady-state folding in time: models/pipeline_schedule.hpp).
  bool every_micro_batch = false;
  // "resilience": failures, checkpoints and restarts (models/goodput.hpp); the machine's
  // checkpoint_write_Bps is read with it.
  std::optional<ResilienceSpec> resilience;
  // "faults": stragglers (topologies/faults.hpp).
  std::optional<FaultSpec> faults;
  std::vector<Annotation> annotations;
};

// Parses and validates; throws ScenarioError. `file` labels messages. Machine references
// ("machine": "sunway-oceanlight") are resolved through the embedded machine files.
Scenario parse_scenario(const std::string& json_text, const std::string& file);
// The same, from a document already in memory (a sweep's plan, built from its base and dimensions:
// no text to write and read back). Its keys are unique by construction, so no duplicate check.
Scenario parse_scenario_doc(const nlohmann::json& root, const std::string& file);
// A plan search's combinations (app/plan_search.cpp): documents equal outside "/plan". For a
// general transformer plan without "slice", and no "resilience" or "faults", parse_outside_plan
// reads once what does not depend on the plan (nullopt otherwise: parse each whole), and
// parse_plan_variant each combination's plan and plan rules on it. Their scenario is
// parse_scenario_doc's, and throws where it throws, less the plan's annotations.
std::optional<Scenario> parse_outside_plan(const nlohmann::json& root, const std::string& file);
Scenario parse_plan_variant(const Scenario& outside_plan, const nlohmann::json& root);
Scenario load_scenario_file(const std::string& path);

}  // namespace exasim
