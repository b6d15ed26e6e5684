// The bodies of exasim's subcommands (app/commands.hpp); app/main.cpp parses the command line.
#include "app/commands.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <iostream>
#include <memory>

#include "app/child_process.hpp"
#include "app/chrome_trace.hpp"
#include "app/embedded.hpp"
#include "sim/files.hpp"
#include "app/pipeline.hpp"
#include "app/profiles.hpp"
#include "app/scenario.hpp"
#include "app/sweep.hpp"
#include "app/sweep_shard.hpp"
#include "app/validate.hpp"
#include "costs/calibrate.hpp"
#include "costs/kernel_times.hpp"
#include "costs/sampled_efficiency.hpp"
#include "kernels/real_kernels.hpp"

namespace exasim {

namespace {

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

// The scenario of `run`, with the command line's --fidelity applied.
Scenario run_scenario(const RunArgs& a) {
  if (a.have_scenario && a.scenario.empty())
    throw ScenarioError("run", "", "expected a scenario file or name, got an empty argument ('')");
  Scenario sc = !a.have_scenario
                    ? parse_scenario(embedded_files().at(kDefaultScenario), std::string("<embedded>/") + kDefaultScenario)
                    : load(a.scenario);
  if (a.fidelity == "folded")
    sc.fidelity = Fidelity::folded;
  else if (a.fidelity == "exhaustive")
    sc.fidelity = Fidelity::exhaustive;
  else if (!a.fidelity.empty())
    throw ScenarioError("--fidelity", "", "folded or exhaustive, got '" + a.fidelity + "'");
  return sc;
}

}  // namespace

std::string folder_name(const std::string& name) {
  // Characters other than letters, digits, '.', '_' and '-' become '_', and a leading '.' is
  // prefixed by '_' (a name of "../.." cannot leave out/).
  std::string s;
  for (unsigned char c : name) s += (std::isalnum(c) || c == '.' || c == '_' || c == '-') ? char(c) : '_';
  if (s.empty() || s[0] == '.') s = "_" + s;
  return s;
}

double graph_ops_limit(const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x) || x < 1)
    throw ScenarioError("--max-graph-ops", "", "expected a number of ops x ranks of at least 1, got '" + v + "'");
  return x;
}

int whole_number(const std::string& flag, const std::string& v, long most) {
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE || n < 1 || n > most)
    throw ScenarioError(flag, "", "expected a whole number from 1 to " + std::to_string(most) + ", got '" + v + "'");
  return static_cast<int>(n);
}

int run_command(const RunArgs& a) {
  PredictOptions po;
  if (!a.max_graph_ops.empty()) po.max_graph_ops = graph_ops_limit(a.max_graph_ops);
  const auto t0 = std::chrono::steady_clock::now();
  const Scenario sc = run_scenario(a);
  const std::string out_dir = a.out_dir.empty() ? "out/" + folder_name(sc.name) : a.out_dir;
  // Unwritable outputs are found before the simulation, not after it.
  check_writable_dir(out_dir);
  if (!a.trace_file.empty()) check_writable_file(a.trace_file);
  po.analytic = a.analytic;
  std::shared_ptr<SampleCache> cache;
  if (a.sample) {
    cache = std::make_shared<SampleCache>(a.cache_file.empty() ? default_cache_path() : a.cache_file);
    po.host = std::make_shared<SampledEfficiency>(load_host_profile(a.profile), SamplerOptions{}, ScalingLimits{}, cache);
  } else {
    po.host = std::make_shared<ProfileEfficiency>(load_host_profile(a.profile));
  }
  const Prediction p = predict(sc, po);
  if (cache) cache->save();
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  nlohmann::json stats{{"wall_s", wall_s}, {"peak_rss_bytes", static_cast<double>(ru.ru_maxrss) * 1024.0}};
  // Everything is formatted before anything is written.
  const std::string report = report_json(p).dump(2) + "\n";
  const std::string trace = a.trace_file.empty() ? std::string() : chrome_trace_json(p);
  // All of the command's outputs at once: a failing trace leaves no report written either.
  std::vector<OutputFile> outputs{{(std::filesystem::path(out_dir) / "report.json").string(), report},
                                  {(std::filesystem::path(out_dir) / "runstats.json").string(), stats.dump(2) + "\n"}};
  if (!a.trace_file.empty()) outputs.push_back({a.trace_file, trace});
  write_outputs(outputs);
  std::cout << summary_text(p);
  std::cout << fmt::format("  wrote {}/report.json and runstats.json ({:.1f} s, peak {:.0f} MiB)\n", out_dir, wall_s,
                           ru.ru_maxrss / 1024.0);
  if (!a.trace_file.empty())
    std::cout << fmt::format("  wrote the trace {} ({:.1f} MB; open it in ui.perfetto.dev or chrome://tracing)\n",
                             a.trace_file, trace.size() / 1e6);
  return 0;
}

int validate_command(const ValidateArgs& a) {
  PredictOptions po;
  po.host = std::make_shared<ProfileEfficiency>(load_host_profile(a.profile));
  const auto rows = run_validation(po);
  if (a.as_json)
    std::cout << rows.dump(2) << "\n";
  else
    std::cout << validation_table(rows);
  return 0;
}

// `calibrate --import-times`: a device's measured kernel times into a kernel profile.
int import_times_command(const CalibrateArgs& a) {
  if (a.out.empty()) throw ProfileError(a.import_times, "", "--import-times expected --out FILE for the profile");
  if (a.attention_backend != "cudnn" && a.attention_backend != "flash")
    throw ProfileError(a.import_times, "", "--attention-backend expected cudnn or flash, got " + a.attention_backend);
  if (a.quick || !a.cache_file.empty())
    throw ProfileError(a.import_times, "", "--import-times measures nothing: expected neither --quick nor --cache");
  check_writable_file(a.out);
  std::string text;
  if (!read_text_file(a.import_times, text).empty()) throw ProfileError(a.import_times, "", "cannot read the file");
  const ImportedProfile ip = profile_from_kernel_times(text, a.import_times, a.attention_backend);
  write_outputs({{a.out, host_profile_json(ip.profile)}});
  std::cout << fmt::format("wrote {}: {} ({}), {} kernel shapes ({} records left out: fp8 GEMMs, other attention backends)\n", a.out,
                           ip.profile.cpu_model, ip.profile.blas, ip.points, ip.left_out);
  for (const auto& [key, peak] : ip.profile.peaks)
    std::cout << fmt::format("  peak {:<17} {}  {:.4g} {}\n", to_string(key.first), to_string(key.second), peak,
                             std::string(peak_key(key.first)) == "peak_flops_per_s" ? "flop/s" : "B/s");
  return 0;
}

int calibrate_command(const CalibrateArgs& a) {
  if (!a.import_times.empty()) return import_times_command(a);
  if (a.attention_backend != "cudnn")
    throw ProfileError("calibrate", "", "--attention-backend is for --import-times (this host runs no fused attention)");
  set_blas_threads(whole_number("--threads", a.threads, 65536));  // atoi's overflow was undefined
  const std::string out = a.out.empty() ? default_profile_path(host_cpu_model()) : a.out;
  check_writable_file(out);  // before minutes of measuring
  const CalibrationPlan plan = a.quick ? quick_calibration() : full_calibration();
  std::unique_ptr<SampleCache> cache;
  if (!a.cache_file.empty()) cache = std::make_unique<SampleCache>(a.cache_file);
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
                             std::string(peak_key(key.first)) == "peak_flops_per_s" ? "flop/s" : "B/s");
  return 0;
}

namespace {

// The sweep flags that only make sense together, checked before anything is read or written.
void check_sweep_flags(const SweepArgs& a) {
  auto refuse = [](const std::string& what) { throw ScenarioError("sweep", "", what); };
  if (a.merge) {
    if (a.out_dir.empty()) refuse("--merge expected --out DIR for the merged result");
    if (a.slurm || !a.shard.empty()) refuse("--merge takes neither --slurm nor --shard");
    return;
  }
  if (a.inputs.size() != 1)
    refuse(fmt::format("expected one sweep file, got {} arguments (--merge joins several folders)", a.inputs.size()));
  if (a.slurm && !a.shard.empty()) refuse("--slurm writes a script for every shard: it takes no --shard");
}

}  // namespace

int sweep_command(const SweepArgs& a) {
  release_blas_threads();  // a sweep's estimates run no GEMM (--sample's would start the pool again)
  check_sweep_flags(a);
  if (a.merge) return merge_shards(a.inputs, a.out_dir, std::cout);
  SweepOptions o;
  auto positive = [](const std::string& flag, const std::string& v) { return whole_number(flag, v, 1000000); };
  if (!a.jobs.empty()) o.jobs = positive("--jobs", a.jobs);
  if (!a.simulate_top.empty()) o.simulate_top = positive("--simulate-top", a.simulate_top);
  if (!a.simulate_within.empty()) o.simulate_within_percent = simulate_within_percent(a.simulate_within);
  if (!a.max_graph_ops.empty()) o.predict.max_graph_ops = graph_ops_limit(a.max_graph_ops);
  if (!a.shard.empty()) o.shard = parse_shard(a.shard);
  o.resume = a.resume;
  o.analytic = a.analytic;
  o.formula = a.formula;
  if (!a.refine_top.empty()) o.refine_top = positive("--refine-top", a.refine_top);
  if (o.refine_top > 0 && o.two_stage())
    throw ScenarioError("sweep", "", "--refine-top excludes --simulate-top and --simulate-within");
  o.isolate = a.isolate;
  o.profile_arg = a.profile;
  SlurmOptions so;
  if (!a.array_size.empty()) so.array_size = static_cast<size_t>(positive("--array-size", a.array_size));
  so.partition = a.partition;
  so.time = a.time;
  so.submit = a.submit;
  // Everything is checked before anything is written.
  const SweepSpec spec = load_sweep(a.inputs[0]);
  o.out_dir = a.out_dir.empty() ? "out/sweeps/" + folder_name(spec.name) : a.out_dir;
  if (a.slurm) {
    so.exe = self_executable();
    return write_slurm_job(a.inputs[0], spec, o, so, std::cout);
  }
  // The sweep's plans share their layers' shapes: each shape's efficiency is looked up once.
  o.predict.host =
      std::make_shared<MemoizedEfficiency>(std::make_shared<ProfileEfficiency>(load_host_profile(a.profile)));
  o.progress = isatty(fileno(stderr));
  return run_sweep(spec, o, std::cout);
}

namespace {
// The embedded tools/exasim_plot package written to a fresh folder under $TMPDIR (removed by the
// destructor), so that python3 imports it as a package.
class PlotPackage {
 public:
  PlotPackage() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/exasim-plot-XXXXXX";
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
    dir_ = pattern;
    const std::string prefix = "tools/exasim_plot/";
    std::filesystem::create_directory(dir_ / "exasim_plot");
    for (const auto& [path, text] : embedded_files()) {
      if (path.rfind(prefix, 0) != 0) continue;
      std::ofstream out(dir_ / "exasim_plot" / path.substr(prefix.size()), std::ios::binary);
      out << text;
      if (!out.flush()) throw std::runtime_error("cannot write " + (dir_ / "exasim_plot").string());
    }
  }
  ~PlotPackage() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  PlotPackage(const PlotPackage&) = delete;
  PlotPackage& operator=(const PlotPackage&) = delete;
  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};
}  // namespace

// `plot` and `report` run the embedded tools/exasim_plot package (written to a temporary folder)
// as `python3 -c <import it from $EXASIM_PLOT_PACKAGE> plot|report ARGS` and return its exit status. It exits 3
// when its python3 lacks matplotlib; then the next interpreter is tried: $EXASIM_PYTHON if set,
// else python3 on the PATH, then Debian's /usr/bin/python3.
int python_command(const std::string& sub, const std::vector<std::string>& args) {
  const PlotPackage package;
  const std::string boot = "import os, sys; sys.path.insert(0, os.environ['EXASIM_PLOT_PACKAGE']); "
                           "from exasim_plot.cli import main; sys.exit(main(sys.argv[1:]))";
  std::vector<std::string> tried;
  const char* env = std::getenv("EXASIM_PYTHON");
  const std::vector<std::string> pythons =
      env && *env ? std::vector<std::string>{env} : std::vector<std::string>{"python3", "/usr/bin/python3"};
  for (const std::string& py : pythons) {
    ChildRun run;
    run.argv = {py, "-c", boot, sub};
    run.argv.insert(run.argv.end(), args.begin(), args.end());
    run.env = {{"EXASIM_PYTHON_PROBE", "1"}, {"EXASIM_PLOT_PACKAGE", package.dir()}};
    const int code = run_child(run);
    if (code != 3 && code != 127) return code;
    tried.push_back(py + (code == 127 ? " (not found)" : " (no matplotlib)"));
  }
  std::cerr << "exasim " << sub << ": needs python3 with matplotlib (Debian: python3-matplotlib, installed by "
            << "tools/setup; or set EXASIM_PYTHON); tried:";
  for (const auto& t : tried) std::cerr << " " << t;
  std::cerr << "\n";
  return 1;
}

int list_command(const std::vector<std::string>& args) {
  if (!args.empty()) throw ScenarioError("list", "", "takes no argument, got '" + args.front() + "'");
  auto under = [](const std::string& path, const char* dir) { return path.rfind(dir, 0) == 0; };
  for (const auto& [path, text] : embedded_files())
    if (under(path, "scenarios/") && !under(path, "scenarios/validation/") && !under(path, "scenarios/sweeps/"))
      std::cout << path << "\n";
  for (const auto& [path, text] : embedded_files())
    if (under(path, "scenarios/sweeps/")) std::cout << path << "  (sweep)\n";
  return 0;
}

namespace {

// One file through the parser alone: a sweep file (it has "dimensions" or "search") or a scenario file. Throws
// the parser's ScenarioError (an unreadable file is load_scenario_file's).
void check_one(const std::string& file) {
  std::string text;
  if (!read_text_file(file, text).empty()) (void)load_scenario_file(file);  // throws its error
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object() && (doc.contains("dimensions") || doc.contains("search")))
    (void)parse_sweep(text, file);
  else
    (void)parse_scenario(text, file);
}

}  // namespace

int check_command(const std::vector<std::string>& files) {
  int status = 0;
  for (const std::string& f : files) {
    try {
      check_one(f);
      std::cout << f << ": ok\n";
    } catch (const ScenarioError& e) {
      std::cout << f << ": refused: " << e.what() << "\n";
      status = 2;
    }
  }
  return status;
}

}  // namespace exasim
