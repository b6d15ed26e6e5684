// exasim command line: run a scenario, validate against published cases, list scenarios.
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "app/embedded.hpp"
#include "app/output.hpp"
#include "app/chrome_trace.hpp"
#include "app/pipeline.hpp"
#include "app/profiles.hpp"
#include "costs/calibrate.hpp"
#include "costs/sampled_efficiency.hpp"
#include "kernels/real_kernels.hpp"
#include "app/scenario.hpp"
#include "app/sweep.hpp"
#include "app/validate.hpp"

using namespace exasim;

namespace {

const char* kDefaultScenario = "scenarios/bagualu-14.5t-mixed.json";

int usage(int code) {
  std::cerr << "usage:\n"
               "  exasim run [SCENARIO.json] [--out DIR] [--fidelity folded|exhaustive] [--profile FILE]\n"
               "      runs a scenario (default: the embedded "
            << kDefaultScenario
            << ");\n"
               "      writes DIR/report.json and DIR/runstats.json (default DIR: out/<scenario name>)\n"
               "      --profile: the host profile that costs the compute (default: the shipped "
            << kDefaultHostProfile
            << ")\n"
               "      --sample: measure this host's kernels now on the step's exact shapes (cached in\n"
               "      --cache FILE, default ~/.cache/exasim/samples.json) instead of the profile's grid\n"
               "      --analytic: a closed-form alpha-beta estimate on the same step graphs, no simulation\n"
               "      --trace FILE.json: also writes the step's timeline as a Chrome trace (Perfetto, chrome://tracing)\n"
               "      --max-graph-ops N: refuse plans whose step graph (ops per rank x ranks, estimated before it is\n"
               "      built) exceeds N (default "
            << kDefaultMaxGraphOps
            << "); sweep takes it too\n"
               "  exasim sweep SWEEP.json [--out DIR] [--jobs N] [--resume] [--analytic | --simulate-top K] [--profile FILE]\n"
               "               [--max-graph-ops N]\n"
               "      predicts every plan of a sweep file (the product of its dimensions over a base scenario),\n"
               "      one process per plan, N at once; streams rows to DIR/results.jsonl and DIR/results.csv\n"
               "      (default DIR: out/sweeps/<sweep name>); --resume continues an interrupted sweep;\n"
               "      --analytic: closed-form estimates only; --simulate-top K: estimates, then the K best simulated\n"
               "  exasim calibrate [--quick] [--out FILE] [--cache FILE] [--threads N (default 1)]\n"
               "      measures this host's kernels into a host profile (default FILE: profiles/host-<cpu>.json)\n"
               "  exasim validate [--json] [--profile FILE]\n"
               "      compares predictions with published measurements\n"
               "  exasim list                lists the embedded scenarios and sweep files\n"
               "  exasim plot KIND INPUT... --out FILE.png|.svg [options]\n"
               "      KIND: scaling (report.json files or a sweep's results), breakdown (report.json files),\n"
               "      strategies (a sweep's results.jsonl/.csv), validation (exasim validate --json output);\n"
               "      exasim plot KIND --help lists the options (python3 with matplotlib)\n"
               "  exasim report DIR --out FILE.html\n"
               "      one self-contained HTML page for DIR/report.json (and DIR/results.jsonl, DIR/validation.json)\n";
  return code;
}

Scenario load(const std::string& arg) {
  // A path to a file on disk wins; otherwise an embedded scenario by path or by name.
  if (FILE* f = std::fopen(arg.c_str(), "r")) {
    std::fclose(f);
    return load_scenario_file(arg);
  }
  if (const std::string key = embedded_key(arg, "scenarios/"); !key.empty())
    return parse_scenario(embedded_files().at(key), "<embedded>/" + key);
  return load_scenario_file(arg);  // reports the unreadable file
}

// A scenario's name as one folder name under out/: characters other than letters, digits, '.', '_'
// and '-' become '_', and a leading '.' is prefixed by '_' (a name of "../.." cannot leave out/).
std::string folder_name(const std::string& name) {
  std::string s;
  for (unsigned char c : name) s += (std::isalnum(c) || c == '.' || c == '_' || c == '-') ? char(c) : '_';
  if (s.empty() || s[0] == '.') s = "_" + s;
  return s;
}

// --max-graph-ops N: a positive number (1e11 and 100000000000 alike).
double graph_ops_limit(const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x) || x < 1)
    throw ScenarioError("--max-graph-ops", "", "expected a number of ops x ranks of at least 1, got '" + v + "'");
  return x;
}

int cmd_run(const std::vector<std::string>& args) {
  std::string scenario_arg, out_dir, fidelity, profile, cache_file, trace_file;
  bool sample = false, analytic = false, have_scenario = false;
  PredictOptions po;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--out" && i + 1 < args.size())
      out_dir = args[++i];
    else if (args[i] == "--max-graph-ops" && i + 1 < args.size())
      po.max_graph_ops = graph_ops_limit(args[++i]);
    else if (args[i] == "--analytic")
      analytic = true;
    else if (args[i] == "--trace" && i + 1 < args.size())
      trace_file = args[++i];
    else if (args[i] == "--profile" && i + 1 < args.size())
      profile = args[++i];
    else if (args[i] == "--sample")
      sample = true;
    else if (args[i] == "--cache" && i + 1 < args.size())
      cache_file = args[++i];
    else if (args[i] == "--fidelity" && i + 1 < args.size())
      fidelity = args[++i];
    else if (!args[i].empty() && args[i][0] == '-')
      return usage(2);
    else if (!have_scenario) {
      scenario_arg = args[i];
      have_scenario = true;
    } else
      return usage(2);
  }
  if (have_scenario && scenario_arg.empty())
    throw ScenarioError("run", "", "expected a scenario file or name, got an empty argument ('')");
  const auto t0 = std::chrono::steady_clock::now();
  Scenario sc = !have_scenario
                    ? parse_scenario(embedded_files().at(kDefaultScenario), std::string("<embedded>/") + kDefaultScenario)
                    : load(scenario_arg);
  if (fidelity == "folded")
    sc.fidelity = Fidelity::folded;
  else if (fidelity == "exhaustive")
    sc.fidelity = Fidelity::exhaustive;
  else if (!fidelity.empty())
    throw ScenarioError("--fidelity", "", "folded or exhaustive, got '" + fidelity + "'");
  if (out_dir.empty()) out_dir = "out/" + folder_name(sc.name);
  // Unwritable outputs are found before the simulation, not after it.
  check_writable_dir(out_dir);
  if (!trace_file.empty()) check_writable_file(trace_file);
  po.analytic = analytic;
  std::shared_ptr<SampleCache> cache;
  if (sample) {
    cache = std::make_shared<SampleCache>(cache_file.empty() ? default_cache_path() : cache_file);
    po.host = std::make_shared<SampledEfficiency>(load_host_profile(profile), SamplerOptions{}, ScalingLimits{}, cache);
  } else {
    po.host = std::make_shared<ProfileEfficiency>(load_host_profile(profile));
  }
  const Prediction p = predict(sc, po);
  if (cache) cache->save();
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  nlohmann::json stats{{"wall_s", wall_s}, {"peak_rss_bytes", static_cast<double>(ru.ru_maxrss) * 1024.0}};
  // Everything is formatted before anything is written.
  const std::string report = report_json(p).dump(2) + "\n";
  const std::string trace = trace_file.empty() ? std::string() : chrome_trace_json(p);
  // All of the command's outputs at once: a failing trace leaves no report written either.
  std::vector<OutputFile> outputs{{(std::filesystem::path(out_dir) / "report.json").string(), report},
                                  {(std::filesystem::path(out_dir) / "runstats.json").string(), stats.dump(2) + "\n"}};
  if (!trace_file.empty()) outputs.push_back({trace_file, trace});
  write_outputs(outputs);
  std::cout << summary_text(p);
  std::cout << fmt::format("  wrote {}/report.json and runstats.json ({:.1f} s, peak {:.0f} MiB)\n", out_dir, wall_s,
                           ru.ru_maxrss / 1024.0);
  if (!trace_file.empty())
    std::cout << fmt::format("  wrote the trace {} ({:.1f} MB; open it in ui.perfetto.dev or chrome://tracing)\n",
                             trace_file, trace.size() / 1e6);
  return 0;
}

int cmd_validate(const std::vector<std::string>& args) {
  bool as_json = false;
  std::string profile;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--json")
      as_json = true;
    else if (args[i] == "--profile" && i + 1 < args.size())
      profile = args[++i];
    else
      return usage(2);
  }
  PredictOptions po;
  po.host = std::make_shared<ProfileEfficiency>(load_host_profile(profile));
  const auto rows = run_validation(po);
  if (as_json)
    std::cout << rows.dump(2) << "\n";
  else
    std::cout << validation_table(rows);
  return 0;
}

// A command-line count from 1 to `most`, checked before conversion (exit 2 otherwise).
int whole_number(const std::string& flag, const std::string& v, long most) {
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE || n < 1 || n > most)
    throw ScenarioError(flag, "", "expected a whole number from 1 to " + std::to_string(most) + ", got '" + v + "'");
  return static_cast<int>(n);
}

int cmd_calibrate(const std::vector<std::string>& args) {
  bool quick = false;
  std::string out, cache_file;
  // One BLAS thread by default: on a small host shared with other work one core measures far
  // more steadily than all of them, and the profile's efficiencies are relative anyway.
  int threads = 1;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--quick")
      quick = true;
    else if (args[i] == "--out" && i + 1 < args.size())
      out = args[++i];
    else if (args[i] == "--cache" && i + 1 < args.size())
      cache_file = args[++i];
    else if (args[i] == "--threads" && i + 1 < args.size())
      threads = whole_number("--threads", args[++i], 65536);  // atoi's overflow was undefined
    else
      return usage(2);
  }
  set_blas_threads(threads);
  if (out.empty()) out = default_profile_path(host_cpu_model());
  check_writable_file(out);  // before minutes of measuring
  const CalibrationPlan plan = quick ? quick_calibration() : full_calibration();
  std::unique_ptr<SampleCache> cache;
  if (!cache_file.empty()) cache = std::make_unique<SampleCache>(cache_file);
  const auto t0 = std::chrono::steady_clock::now();
  const bool tty = isatty(fileno(stderr));
  std::string last_kernel;
  const HostProfile hp = calibrate_host(plan, cache.get(), [&](const std::string& what, size_t done, size_t total) {
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string kernel = what.substr(0, what.find('['));
    if (tty)
      std::cerr << fmt::format("\rcalibrate: {:4}/{} {:<40} {:6.1f} s", done, total, what, el) << std::flush;
    else if (kernel != last_kernel || done == total)
      std::cerr << fmt::format("calibrate: {:4}/{} {} ({:.1f} s)\n", done, total, what, el);
    last_kernel = kernel;
  });
  if (tty) std::cerr << "\n";
  if (cache) cache->save();
  write_outputs({{out, host_profile_json(hp)}});
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("wrote {}: {} ({} BLAS thread(s)), {} kernel shapes in {:.1f} s\n", out, hp.cpu_model,
                           hp.blas_threads, plan.samples(), wall_s);
  for (const auto& [key, peak] : hp.peaks)
    std::cout << fmt::format("  peak {:<17} {}  {:.4g} {}\n", to_string(key.first), to_string(key.second), peak,
                             key.first == KernelClass::gemm ? "flop/s" : "B/s");
  return 0;
}

int cmd_sweep(const std::vector<std::string>& args) {
  std::string sweep_arg, out_dir, profile;
  SweepOptions o;
  bool analytic = false, top = false;
  auto positive = [](const std::string& flag, const std::string& v) { return whole_number(flag, v, 1000000); };
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--out" && i + 1 < args.size())
      out_dir = args[++i];
    else if (args[i] == "--jobs" && i + 1 < args.size())
      o.jobs = positive("--jobs", args[++i]);
    else if (args[i] == "--resume")
      o.resume = true;
    else if (args[i] == "--analytic")
      analytic = true;
    else if (args[i] == "--simulate-top" && i + 1 < args.size()) {
      top = true;
      o.simulate_top = positive("--simulate-top", args[++i]);
    } else if (args[i] == "--profile" && i + 1 < args.size())
      profile = args[++i];
    else if (args[i] == "--max-graph-ops" && i + 1 < args.size())
      o.predict.max_graph_ops = graph_ops_limit(args[++i]);
    else if (!args[i].empty() && args[i][0] == '-')
      return usage(2);
    else if (sweep_arg.empty())
      sweep_arg = args[i];
    else
      return usage(2);
  }
  if (sweep_arg.empty() || (analytic && top)) return usage(2);
  o.analytic = analytic;
  // Everything is checked before anything is written.
  const SweepSpec spec = load_sweep(sweep_arg);
  o.out_dir = out_dir.empty() ? "out/sweeps/" + folder_name(spec.name) : out_dir;
  o.predict.host = std::make_shared<ProfileEfficiency>(load_host_profile(profile));
  o.progress = isatty(fileno(stderr));
  return run_sweep(spec, o, std::cout);
}

// `plot` and `report` run the embedded tools/plot.py as `python3 -c <script> plot|report ARGS` and
// return its exit status. The script exits 3 when its python3 lacks matplotlib; then the next
// interpreter is tried: $EXASIM_PYTHON if set, else python3 on the PATH, then Debian's /usr/bin/python3.
int cmd_python(const std::string& sub, const std::vector<std::string>& args) {
  const std::string& script = embedded_files().at("tools/plot.py");
  std::vector<std::string> tried;
  const char* env = std::getenv("EXASIM_PYTHON");
  const std::vector<std::string> pythons =
      env && *env ? std::vector<std::string>{env} : std::vector<std::string>{"python3", "/usr/bin/python3"};
  for (const std::string& py : pythons) {
    std::vector<std::string> argv_s{py, "-c", script, sub};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::cout.flush();
    std::cerr.flush();
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      setenv("EXASIM_PYTHON_PROBE", "1", 1);
      execvp(argv[0], argv.data());
      _exit(127);  // not found: the parent tries the next one
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
      if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    const int code = WEXITSTATUS(status);
    if (code != 3 && code != 127) return code;
    tried.push_back(py + (code == 127 ? " (not found)" : " (no matplotlib)"));
  }
  std::cerr << "exasim " << sub << ": needs python3 with matplotlib (Debian: python3-matplotlib, installed by "
            << "tools/setup; or set EXASIM_PYTHON); tried:";
  for (const auto& t : tried) std::cerr << " " << t;
  std::cerr << "\n";
  return 1;
}

// The embedded scenarios (for `run`), then the sweep files (for `sweep`). Takes no argument.
int cmd_list(const std::vector<std::string>& args) {
  if (!args.empty()) {
    std::cerr << "exasim list: takes no argument, got '" << args.front() << "'\n";
    return usage(2);
  }
  auto under = [](const std::string& path, const char* dir) { return path.rfind(dir, 0) == 0; };
  for (const auto& [path, text] : embedded_files())
    if (under(path, "scenarios/") && !under(path, "scenarios/validation/") && !under(path, "scenarios/sweeps/"))
      std::cout << path << "\n";
  for (const auto& [path, text] : embedded_files())
    if (under(path, "scenarios/sweeps/")) std::cout << path << "  (sweep)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(2);
  const std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (cmd == "run") return cmd_run(args);
    if (cmd == "validate") return cmd_validate(args);
    if (cmd == "calibrate") return cmd_calibrate(args);
    if (cmd == "sweep") return cmd_sweep(args);
    if (cmd == "list") return cmd_list(args);
    if (cmd == "plot" || cmd == "report") return cmd_python(cmd, args);
    if (cmd == "--help" || cmd == "-h" || cmd == "help") return usage(0);
    return usage(2);
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
