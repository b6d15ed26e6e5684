// exasim command line: run a scenario, validate against published cases, list scenarios.
#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "app/embedded.hpp"
#include "app/output.hpp"
#include "app/pipeline.hpp"
#include "app/scenario.hpp"
#include "app/validate.hpp"

using namespace exasim;

namespace {

const char* kDefaultScenario = "scenarios/bagualu-14.5t-mixed.json";

int usage(int code) {
  std::cerr << "usage:\n"
               "  exasim run [SCENARIO.json] [--out DIR] [--fidelity folded|exhaustive]\n"
               "      runs a scenario (default: the embedded "
            << kDefaultScenario
            << ");\n"
               "      writes DIR/report.json and DIR/runstats.json (default DIR: out/<scenario name>)\n"
               "  exasim validate [--json]   compares predictions with published measurements\n"
               "  exasim list                lists the embedded scenarios\n";
  return code;
}

Scenario load(const std::string& arg) {
  const auto& files = embedded_files();
  // A path to a file on disk wins; otherwise an embedded scenario by path or by name.
  if (FILE* f = std::fopen(arg.c_str(), "r")) {
    std::fclose(f);
    return load_scenario_file(arg);
  }
  for (const std::string& key : {arg, "scenarios/" + arg, "scenarios/" + arg + ".json"}) {
    auto it = files.find(key);
    if (it != files.end()) return parse_scenario(it->second, "<embedded>/" + key);
  }
  return load_scenario_file(arg);  // reports the unreadable file
}

int cmd_run(const std::vector<std::string>& args) {
  std::string scenario_arg, out_dir, fidelity;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--out" && i + 1 < args.size())
      out_dir = args[++i];
    else if (args[i] == "--fidelity" && i + 1 < args.size())
      fidelity = args[++i];
    else if (!args[i].empty() && args[i][0] == '-')
      return usage(2);
    else if (scenario_arg.empty())
      scenario_arg = args[i];
    else
      return usage(2);
  }
  const auto t0 = std::chrono::steady_clock::now();
  Scenario sc = scenario_arg.empty()
                    ? parse_scenario(embedded_files().at(kDefaultScenario), std::string("<embedded>/") + kDefaultScenario)
                    : load(scenario_arg);
  if (fidelity == "folded")
    sc.fidelity = Fidelity::folded;
  else if (fidelity == "exhaustive")
    sc.fidelity = Fidelity::exhaustive;
  else if (!fidelity.empty())
    throw ScenarioError("--fidelity", "", "folded or exhaustive, got '" + fidelity + "'");
  if (out_dir.empty()) out_dir = "out/" + sc.name;
  const Prediction p = predict(sc);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  nlohmann::json stats{{"wall_s", wall_s}, {"peak_rss_bytes", static_cast<double>(ru.ru_maxrss) * 1024.0}};
  write_files_atomically(out_dir, {{"report.json", report_json(p).dump(2) + "\n"}, {"runstats.json", stats.dump(2) + "\n"}});
  std::cout << summary_text(p);
  std::cout << fmt::format("  wrote {}/report.json and runstats.json ({:.1f} s, peak {:.0f} MiB)\n", out_dir, wall_s,
                           ru.ru_maxrss / 1024.0);
  return 0;
}

int cmd_validate(const std::vector<std::string>& args) {
  bool as_json = false;
  for (auto& a : args) {
    if (a == "--json")
      as_json = true;
    else
      return usage(2);
  }
  const auto rows = run_validation();
  if (as_json)
    std::cout << rows.dump(2) << "\n";
  else
    std::cout << validation_table(rows);
  return 0;
}

int cmd_list() {
  for (const auto& [path, text] : embedded_files())
    if (path.rfind("scenarios/", 0) == 0 && path.rfind("scenarios/validation/", 0) != 0) std::cout << path << "\n";
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
    if (cmd == "list") return cmd_list();
    if (cmd == "--help" || cmd == "-h" || cmd == "help") return usage(0);
    return usage(2);
  } catch (const ScenarioError& e) {
    std::cerr << "exasim: error: " << e.what() << "\n";
    return 2;
  } catch (const DoesNotFitError& e) {
    std::cerr << "exasim: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "exasim: error: " << e.what() << "\n";
    return 1;
  }
}
