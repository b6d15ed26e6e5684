// exasim command line (CLI11): one function registers each subcommand's options, with an example;
// the subcommands' bodies are in app/commands.cpp. Bad flags and bad input exit 2.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "sim/files.hpp"
#include "app/pipeline.hpp"
#include "app/profiles.hpp"
#include "app/scenario.hpp"
#include "costs/calibrate.hpp"

using namespace exasim;

namespace {

// Where each subcommand's parsed arguments land before its body runs.
struct Args {
  RunArgs run;
  ValidateArgs validate;
  CalibrateArgs calibrate;
  SweepArgs sweep;
  std::vector<std::string> passed_on;  // plot and report: handed to tools/exasim_plot as they are
  std::string help_topic;
  std::vector<std::string> check_files;
};

const std::string kProfileHelp = std::string("host profile that costs the compute (default: the shipped ") +
                                 kDefaultHostProfile + ")";

CLI::App* add_run(CLI::App& app, RunArgs& a) {
  CLI::App* sub = app.add_subcommand("run", "predict one scenario's step time; writes DIR/report.json and "
                                            "DIR/runstats.json");
  sub->add_option("scenario", a.scenario,
                  std::string("scenario file, or an embedded scenario's name or path (default: ") + kDefaultScenario +
                      "; `exasim list` names them)")
      ->each([&a](const std::string&) { a.have_scenario = true; })
      ->type_name("SCENARIO");
  sub->add_option("--out", a.out_dir, "output folder (default: out/<scenario name>)")->type_name("DIR");
  sub->add_option("--fidelity", a.fidelity, "folded (default) or exhaustive (every rank simulated)")->type_name("NAME");
  sub->add_option("--profile", a.profile, kProfileHelp)->type_name("FILE");
  sub->add_flag("--sample", a.sample,
                "measure this host's kernels now on the step's exact shapes instead of the profile's grid");
  sub->add_option("--cache", a.cache_file, "--sample's cache (default: ~/.cache/exasim/samples.json)")->type_name("FILE");
  sub->add_flag("--analytic", a.analytic, "a closed-form alpha-beta estimate on the same step graphs, no simulation");
  sub->add_option("--trace", a.trace_file, "also write the step's timeline as a Chrome trace (FILE.json)")->type_name("FILE");
  sub->add_option("--max-graph-ops", a.max_graph_ops,
                  "refuse plans whose step graph (ops per rank x ranks, estimated before it is built) exceeds N " +
                      fmt::format("(default {:g})", kDefaultMaxGraphOps))
      ->type_name("N");
  sub->footer("Example:\n  exasim run moda-1024 --out out/moda --trace out/moda/trace.json");
  return sub;
}

CLI::App* add_validate(CLI::App& app, ValidateArgs& a) {
  CLI::App* sub = app.add_subcommand("validate", "compare predictions with published measurements");
  sub->add_flag("--json", a.as_json, "print the rows as JSON instead of a table");
  sub->add_option("--profile", a.profile, kProfileHelp)->type_name("FILE");
  sub->footer("Example:\n  exasim validate --json > validation.json");
  return sub;
}

CLI::App* add_calibrate(CLI::App& app, CalibrateArgs& a) {
  CLI::App* sub = app.add_subcommand("calibrate", "measure this host's kernels into a host profile");
  sub->add_flag("--quick", a.quick, "a small grid of shapes (seconds, not minutes)");
  sub->add_option("--out", a.out, "the profile to write (default: profiles/host-<cpu>.json)")->type_name("FILE");
  sub->add_option("--cache", a.cache_file, "reuse and extend the measurements kept in FILE")->type_name("FILE");
  sub->add_option("--threads", a.threads, "BLAS threads")->capture_default_str()->type_name("N");
  sub->add_option("--import-times", a.import_times,
                  "measure nothing: turn the kernel times FILE that tools/calibrate-gpu.py wrote on a GPU into a "
                  "kernel profile (needs --out)")
      ->type_name("FILE");
  sub->add_option("--attention-backend", a.attention_backend,
                  "with --import-times: whose fused attention the profile holds: cudnn (Transformer Engine's on "
                  "Hopper) or flash (PyTorch's FlashAttention-2)")
      ->capture_default_str()
      ->type_name("NAME");
  sub->footer(
      "Examples:\n  exasim calibrate --quick --out /tmp/host.json\n"
      "  exasim calibrate --import-times h100-times.json --out profiles/device-h100-sxm5-80gb.json");
  return sub;
}

CLI::App* add_sweep(CLI::App& app, SweepArgs& a) {
  CLI::App* sub = app.add_subcommand(
      "sweep", "predict every plan of a sweep file (the product of its dimensions, or a \"search\" over every valid "
               "plan, over a base scenario); streams rows to DIR/results.jsonl and DIR/results.csv");
  sub->add_option("sweep_file", a.inputs, "the sweep file; with --merge, the shards' folders")->required()->type_name("FILE");
  sub->add_option("--out", a.out_dir, "output folder (default: out/sweeps/<sweep name>)")->type_name("DIR");
  sub->add_option("--jobs", a.jobs, "plans predicted at once (default 1)")->type_name("N");
  sub->add_flag("--resume", a.resume, "continue an interrupted sweep in the same folder");
  CLI::Option* analytic =
      sub->add_flag("--analytic", a.analytic, "closed-form estimates only, in this process (no process per plan)");
  sub->add_option("--simulate-top", a.simulate_top, "estimates, then the K best plans simulated")->excludes(analytic)->type_name("K");
  sub->add_option("--simulate-within", a.simulate_within,
                  "estimates, then every plan within P % of the best estimate simulated")
      ->excludes(analytic)
      ->type_name("P");
  CLI::Option* formula = sub->add_flag(
      "--formula", a.formula,
      "the formula tier: every plan in closed form without its step graphs (models/plan_formula.hpp; plans out of "
      "its scope get the analytic estimate); with --simulate-top or --simulate-within it chooses the plans simulated");
  formula->excludes(analytic);
  sub->add_option("--refine-top", a.refine_top, "--formula: then the K best plans estimated again on their step graphs")
      ->needs(formula)
      ->type_name("K");
  sub->add_flag("--isolate", a.isolate, "closed-form estimates in a process per plan, as before (slower)");
  sub->add_option("--shard", a.shard, "run only the i-th of N disjoint shards of the plans")->type_name("i/N");
  CLI::Option* slurm = sub->add_flag("--slurm", a.slurm, "write a Slurm job-array script whose tasks run the shards");
  sub->add_option("--array-size", a.array_size, "--slurm: tasks in the array (default: plans, at most 64)")
      ->needs(slurm)
      ->type_name("N");
  sub->add_option("--partition", a.partition, "--slurm: the partition")->needs(slurm)->type_name("P");
  sub->add_option("--time", a.time, "--slurm: each task's time limit (Slurm's format)")->needs(slurm)->type_name("T");
  sub->add_flag("--submit", a.submit, "--slurm: submit the script with sbatch (checked by sbatch --test-only first)")
      ->needs(slurm);
  sub->add_flag("--merge", a.merge, "join the shards' folders (the inputs) into one ranked result in --out");
  sub->add_option("--profile", a.profile, kProfileHelp)->type_name("FILE");
  sub->add_option("--max-graph-ops", a.max_graph_ops, "as for run")->type_name("N");
  sub->footer(
      "Examples:\n  exasim sweep scenarios/sweeps/tensor3d-batch.json --jobs 2 --simulate-top 3\n"
      "  exasim sweep scenarios/sweeps/gpt-175b-a100-1024-search.json --simulate-top 8 --jobs 2\n"
      "  exasim sweep SWEEP.json --slurm --array-size 4 --out runs/s --submit\n"
      "  exasim sweep --merge runs/s/shard-* --out runs/s/merged");
  return sub;
}

// plot and report hand everything after the subcommand to tools/exasim_plot (`exasim plot KIND --help`
// lists a kind's options); `exasim plot --help` alone is CLI11's.
CLI::App* add_python(CLI::App& app, const std::string& name, const std::string& what, const std::string& example) {
  CLI::App* sub = app.add_subcommand(name, what);
  sub->prefix_command()->allow_extras();
  sub->footer("Everything after the subcommand goes to tools/exasim_plot (python3 with matplotlib).\nExample:\n  " +
              example);
  return sub;
}

CLI::App* add_list(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("list", "list the embedded scenarios and sweep files (takes no argument)");
  sub->allow_extras();  // refused by dispatch() with list's own message
  sub->footer("Example:\n  exasim list");
  return sub;
}

CLI::App* add_check(CLI::App& app, std::vector<std::string>& files) {
  CLI::App* sub = app.add_subcommand("check", "run scenario and sweep files through the parser alone (nothing is "
                                              "simulated): one line per file, exit 2 when any is refused");
  sub->add_option("files", files, "scenario or sweep files (a sweep file has \"dimensions\")")->required()->type_name("FILE");
  sub->footer("Example:\n  exasim check scenarios/*.json scenarios/sweeps/*.json");
  return sub;
}

CLI::App* add_help(CLI::App& app, std::string& topic) {
  CLI::App* sub = app.add_subcommand("help", "this help, or a subcommand's (exasim help SUBCOMMAND)");
  sub->add_option("subcommand", topic, "the subcommand")->type_name("NAME");
  sub->footer("Example:\n  exasim help sweep");
  return sub;
}

// A bad command line: CLI11's message (it names the flag), where to look, exit 2.
int command_line_error(const CLI::App& app, const CLI::ParseError& e, const std::string& first) {
  std::string where = "exasim";
  for (const CLI::App* sub : app.get_subcommands()) where += " " + sub->get_name();
  if (where == "exasim" && !first.empty() && first[0] != '-')
    std::cerr << "exasim: error: no subcommand '" << first << "'\n";
  else
    std::cerr << "exasim: error: " << e.what() << "\n";
  std::cerr << "Run '" << where << " --help' for the options.\n";
  return 2;
}

int help(const CLI::App& app, const std::string& topic) {
  if (topic.empty()) {
    std::cout << app.get_formatter()->make_help(&app, "exasim", CLI::AppFormatMode::Normal);
    return 0;
  }
  for (const CLI::App* sub : app.get_subcommands({}))
    if (sub->get_name() == topic) {
      std::cout << sub->get_formatter()->make_help(sub, "exasim " + topic, CLI::AppFormatMode::Normal);
      return 0;
    }
  std::cerr << "exasim: error: help: no subcommand '" << topic << "'\n";
  return 2;
}

int dispatch(const CLI::App& app, Args& a) {
  const std::string cmd = app.get_subcommands().front()->get_name();
  if (cmd == "run") return run_command(a.run);
  if (cmd == "validate") return validate_command(a.validate);
  if (cmd == "calibrate") return calibrate_command(a.calibrate);
  if (cmd == "sweep") return sweep_command(a.sweep);
  if (cmd == "check") return check_command(a.check_files);
  if (cmd == "list") return list_command(app.get_subcommands().front()->remaining());
  if (cmd == "help") return help(app, a.help_topic);
  return python_command(cmd, app.get_subcommands().front()->remaining());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"exasim: predicts the training step time of huge neural networks on huge machines", "exasim"};
  app.set_version_flag("--version", std::string("exasim ") + EXASIM_VERSION);
  app.require_subcommand(1);
  Args a;
  add_run(app, a.run);
  add_validate(app, a.validate);
  add_calibrate(app, a.calibrate);
  add_sweep(app, a.sweep);
  add_list(app);
  add_check(app, a.check_files);
  add_python(app, "plot", "plot reports, sweeps or validation rows: KIND INPUT... --out FILE.png|.svg",
             "exasim plot breakdown out/moda/report.json --out breakdown.png");
  add_python(app, "report", "one self-contained HTML page for DIR/report.json: DIR --out FILE.html",
             "exasim report out/moda --out moda.html");
  add_help(app, a.help_topic);
  if (argc < 2) {
    std::cerr << app.help();
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return command_line_error(app, e, argv[1]);
  }
  try {
    return dispatch(app, a);
  } catch (const ScenarioError& e) {
    std::cerr << "exasim: error: " << e.what() << "\n";
    return 2;
  } catch (const ProfileError& e) {
    std::cerr << "exasim: error: " << e.what() << "\n";
    return 2;
  } catch (const DoesNotFitError& e) {
    std::cerr << "exasim: error: " << e.what() << "\n";
    return 2;
  } catch (const OutputError& e) {
    std::cerr << "exasim: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "exasim: error: " << e.what() << "\n";
    return 1;
  }
}
