// `exasim sweep`: a plan space (the cartesian product of a sweep file's dimensions applied to a
// base scenario) predicted plan by plan, each in its own process, into DIR/results.jsonl and
// DIR/results.csv.
//
// A sweep file:
//   {"name": "...", "base": "scenario name, path or inline object",
//    "dimensions": {"/plan/tensor_parallel": [1, 2, 4],                 -- a JSON pointer: values
//                   "/plan/devices": {"from": 64, "to": 1024, "times": 2},  -- 64, 128, ... 1024
//                   "/plan/micro_batch": {"from": 1, "to": 4, "step": 1},
//                   "/model/experts_per_layer": {"with": "/plan/devices", "values": [25, 50, 100, 200, 400]}},
//    "rank_by": "tokens_per_s",
//    "validation": "bagualu-weak-scaling"}
// Plan ids enumerate the product with the first dimension outermost (the last one varies fastest).
// A dimension written {"with": POINTER, "values": [...]} is linked: it adds no plans but takes its
// i-th value whenever the earlier dimension POINTER takes its i-th (a weak-scaling study grows the
// model with the machine). "validation" names the published case (scenarios/validation/CASE.json)
// that the results are compared with; `exasim sweep` records it in DIR/sweep.json, where
// `exasim plot scaling` finds it and draws the published points.
#pragma once
#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "app/pipeline.hpp"

namespace exasim {

using ojson = nlohmann::ordered_json;  // rows keep their columns' order

struct SweepDimension {
  std::string pointer;         // into the scenario, e.g. "/plan/tensor_parallel"
  std::vector<ojson> values;   // the list, or the range written out
  int leader = -1;             // linked: the index of the dimension whose value index it takes
};

struct SweepSpec {
  std::string file;       // the sweep file (labels messages)
  std::string name;
  std::string base_file;  // where the base scenario came from
  nlohmann::json base;    // the base scenario's JSON
  std::vector<SweepDimension> dimensions;
  std::string rank_by = "tokens_per_s";
  std::string validation;  // a validation case id, or empty
  // A search (app/plan_search.hpp): the valid plans under the constraints, enumerated into one
  // free dimension (tensor_parallel) and the others linked to it; the summary shows `top` plans
  // with their step-time breakdown. search_note: how many combinations were ruled out and why.
  bool search = false;
  size_t top = 10;
  std::string search_note;
  size_t plan_count() const;  // the product of the free (not linked) dimensions' sizes
};

// The row fields a sweep may rank by; smaller is better for step_time_s, larger for the others.
const std::vector<std::string>& rankable_fields();
bool larger_is_better(const std::string& field);

// Parses and checks a sweep file; throws ScenarioError naming `file` and the JSON path of the
// problem. A base named by a path is read relative to the sweep file's folder, then to the
// working directory, then looked up among the embedded scenarios.
SweepSpec parse_sweep(const std::string& json_text, const std::string& file);
SweepSpec load_sweep(const std::string& arg);  // a file, or an embedded sweep by name

// A dimension's values: a non-empty list, or a range {"from", "to", "times"} / {"from", "to",
// "step"}. `path` is the dimension's JSON path in the sweep file (for errors).
std::vector<ojson> expand_dimension(const ojson& v, const std::string& file, const std::string& path);

// The index of each dimension's value for a plan id (a linked dimension's is its leader's).
std::vector<size_t> plan_indices(const SweepSpec& s, size_t plan);
// Sets `pointer` in `doc` to `value` (its parent must exist). A device count and a
// data-parallel size exclude each other: setting one drops the other.
void apply_pointer(nlohmann::json& doc, const std::string& pointer, const nlohmann::json& value);
// The base scenario with the plan's values applied.
nlohmann::json plan_scenario(const SweepSpec& s, size_t plan);

// Rows: {"plan", "status" (ok|invalid|infeasible|error), each dimension's value under its
// pointer, "mode" (simulated|analytic; absent for an invalid plan, which is never run), the
// figures, or "reason"}. Under --simulate-top a simulated row also keeps the analytic estimate it
// was chosen on as "analytic_<rank_by>" (in the JSON lines only).
ojson row_head(const SweepSpec& s, size_t plan);
ojson ok_row(const SweepSpec& s, size_t plan, const Prediction& p);
ojson failed_row(const SweepSpec& s, size_t plan, const std::string& status, const std::string& reason,
                 const std::string& mode);
std::string row_line(const ojson& row);  // one JSON line, '\n'-terminated

std::string csv_field(const std::string& text);  // RFC 4180 quoting where needed
std::vector<std::string> csv_columns(const SweepSpec& s);
std::string csv_header(const SweepSpec& s);
std::string csv_line(const SweepSpec& s, const ojson& row);

// A results.jsonl as written so far: its whole rows, and how many bytes they take. A last line
// without its newline (or that does not parse) is torn and not counted; a bad line before the
// last throws ScenarioError.
struct JsonlContents {
  std::vector<ojson> rows;
  size_t good_bytes = 0;
  bool torn = false;
};
JsonlContents read_results_jsonl(const std::string& text, const std::string& file);

// Shard i of N of a sweep's plans (app/sweep_shard.hpp): the plan ids p with p % N == i - 1.
struct ShardSpec {
  size_t index = 1;  // 1-based
  size_t count = 1;  // 1: the whole sweep
  bool whole() const { return count == 1; }
  bool holds(size_t plan) const { return plan % count == index - 1; }
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
};

struct SweepOptions {
  std::string out_dir;
  int jobs = 1;
  bool resume = false;
  bool analytic = false;
  // The formula tier (models/plan_formula.hpp): every plan in closed form in this process, no
  // graph; plans out of its scope get the analytic estimate. refine_top > 0: then the K best
  // formula rows are estimated again on the graphs (analytic), keeping "formula_<rank_by>".
  bool formula = false;
  int refine_top = 0;
  int simulate_top = 0;  // > 0: analytic everywhere, then the K best simulated
  // > 0: analytic everywhere, then every plan whose estimate is within this many percent of the
  // best estimate simulated (with simulate_top too: the K best of those).
  double simulate_within_percent = 0;
  ShardSpec shard;
  std::string profile_arg;  // --profile as given (a Slurm job's tasks pass it on)
  bool two_stage() const { return simulate_top > 0 || simulate_within_percent > 0; }
  // How the rows were made ("simulated", "analytic", "simulate-top 10", "simulate-top 10 within 5%"):
  // recorded in DIR/sweep.json; the merge joins only shards made the same way.
  std::string mode_text() const;
  PredictOptions predict;
  bool progress = false;  // a redrawn progress line on stderr
  // Closed-form estimates each in a forked process (as before they ran in the sweep's own
  // process); the simulations always are. For comparing the two.
  bool isolate = false;
};

// DIR/sweep.json's content for a sweep run with `o`: the sweep's name, base, dimensions, mode,
// shard and the fingerprint of its base scenario and dimensions (what --resume and --merge compare).
ojson sweep_meta(const SweepSpec& s, const SweepOptions& o);
// The SweepSpec that a sweep.json describes (no base scenario: enough for rows, CSV and summary).
SweepSpec spec_from_meta(const ojson& meta, const std::string& file);
// Plan ids of the ok rows, best first by s.rank_by (ties: the lower plan id first); by_analytic:
// by the closed-form estimate (a simulated row keeps it as "analytic_<rank_by>").
std::vector<size_t> ranked_ids(const SweepSpec& s, const std::map<size_t, ojson>& rows, bool by_analytic);
// The same by the estimate of `mode` ("analytic", "formula"): a row that keeps it as
// "<mode>_<rank_by>" by that value, an ok row of that mode by its own; "" : every ok row.
std::vector<size_t> ranked_by_estimate(const SweepSpec& s, const std::map<size_t, ojson>& rows, const std::string& mode);
// The counts, the most common reasons and the ten best rows, as `exasim sweep` prints them.
void print_sweep_summary(const SweepSpec& s, const std::map<size_t, ojson>& rows, std::ostream& out);
// Writes DIR/results.jsonl and DIR/results.csv (rows sorted by plan id), each whole and renamed into place.
void write_sweep_results(const std::string& dir, const SweepSpec& s, const std::map<size_t, ojson>& rows);

// Runs the sweep; writes the results and prints the summary on `out`. Returns the exit status.
int run_sweep(const SweepSpec& s, const SweepOptions& o, std::ostream& out);

}  // namespace exasim
