// The bodies of exasim's subcommands, one function each, on arguments already split by the command
// line (app/main.cpp registers each subcommand's options with CLI11 and fills these structures).
// Bad input throws ScenarioError (exit 2); the functions return the process's exit status.
#pragma once

#include <string>
#include <vector>

namespace exasim {

inline constexpr const char* kDefaultScenario = "scenarios/bagualu-14.5t-mixed.json";

struct RunArgs {
  std::string scenario;  // a file or an embedded scenario's name or path
  bool have_scenario = false;  // false: the embedded kDefaultScenario
  std::string out_dir, fidelity, profile, cache_file, trace_file, max_graph_ops;
  bool sample = false, analytic = false;
};

struct ValidateArgs {
  bool as_json = false;
  std::string profile;
};

struct CalibrateArgs {
  bool quick = false;
  std::string out, cache_file;
  // Times measured elsewhere (tools/calibrate-gpu.py on a GPU): imported, not measured here.
  std::string import_times;
  std::string attention_backend = "cudnn";  // whose fused attention --import-times takes
  // One BLAS thread by default: on a small host shared with other work one core measures far
  // more steadily than all of them, and the profile's efficiencies are relative anyway.
  std::string threads = "1";
};

struct SweepArgs {
  std::vector<std::string> inputs;  // the sweep file; with --merge, the shards' folders
  std::string out_dir, profile, jobs, simulate_top, simulate_within, max_graph_ops, shard, refine_top;
  std::string array_size, partition, time;  // --slurm's
  bool resume = false, analytic = false, formula = false, isolate = false, slurm = false, submit = false, merge = false;
};

int run_command(const RunArgs& a);
int validate_command(const ValidateArgs& a);
int calibrate_command(const CalibrateArgs& a);
int sweep_command(const SweepArgs& a);
// `plot` and `report`: the embedded tools/exasim_plot run by python3 with SUB and ARGS.
int python_command(const std::string& sub, const std::vector<std::string>& args);
// `list`: the embedded scenarios (for `run`), then the sweep files (for `sweep`); takes no argument.
int list_command(const std::vector<std::string>& args);
// `check FILE...`: each scenario or sweep file (a sweep has "dimensions") through the parser alone, one
// line per file on stdout ("FILE: ok" or "FILE: refused: MESSAGE"); exit 2 when any is refused.
int check_command(const std::vector<std::string>& files);

// --max-graph-ops N: a positive number (1e11 and 100000000000 alike); ScenarioError naming the flag.
double graph_ops_limit(const std::string& v);
// A command-line count from 1 to `most`, checked before conversion; ScenarioError naming the flag.
int whole_number(const std::string& flag, const std::string& v, long most);
// A scenario's name as one folder name under out/ (letters, digits, '.', '_', '-'; never "." or "..").
std::string folder_name(const std::string& name);

}  // namespace exasim
