#include "app/validate.hpp"

#include <fmt/format.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <map>
#include <set>
#include <utility>
#include <stdexcept>

#include "app/child_process.hpp"
#include "app/embedded.hpp"
#include "app/pipeline.hpp"
#include "app/scenario.hpp"

namespace exasim {

namespace {
const std::string& embedded(const std::string& path) {
  const auto& files = embedded_files();
  auto it = files.find(path);
  if (it == files.end()) throw std::runtime_error("validation case refers to '" + path + "', which is not embedded");
  return it->second;
}
// A case's metric is a top-level figure of the prediction's report ("sustained_pflops",
// "model_tflops_per_device", "tokens_per_s", ...) or a JSON pointer into it
// ("/memory_per_device/model_state_bytes"), optionally times "metric_scale" (bytes to GB: 1e-9).
double metric_of(const nlohmann::json& report, const std::string& metric, const std::string& id) {
  const nlohmann::json::json_pointer ptr(metric.rfind('/', 0) == 0 ? metric : "/" + metric);
  if (!report.contains(ptr) || !report.at(ptr).is_number())
    throw std::runtime_error(id + ": the report has no number at '" + metric + "'");
  return report.at(ptr).get<double>();
}

// SimGrid allows one engine per process: each scenario runs in a child process that sends
// back its figures (or its error) through a pipe.
nlohmann::json predict_in_child(const Scenario& sc, const PredictOptions& o) {
  const ForkedChild child = fork_child([&](int fd) {
    std::string msg;
    try {
      msg = "ok " + report_json(predict(sc, o)).dump();
    } catch (const std::exception& e) {
      msg = std::string("error ") + e.what();
    }
    return write_all(fd, msg) ? 0 : 1;
  });
  const std::string msg = read_to_end(child.read_fd);
  const int status = wait_status(child.pid);
  if (msg.rfind("ok ", 0) == 0) return nlohmann::json::parse(msg.substr(3));
  if (msg.rfind("error ", 0) == 0) {
    const std::string what = msg.substr(6);  // most errors name the scenario file already
    throw std::runtime_error(what.rfind(sc.file, 0) == 0 ? what : sc.file + ": " + what);
  }
  throw std::runtime_error(sc.file + ": the simulation process died (status " + std::to_string(status) + ")");
}

// A figure's scenario: the embedded file, with its "set" overrides (JSON pointer -> value) applied,
// as a sweep's dimensions apply theirs: one scenario file serves several modes of one case.
Scenario figure_scenario(const nlohmann::json& f, const std::string& id) {
  const std::string sp = f.at("scenario");
  if (!f.contains("set")) return parse_scenario(embedded(sp), sp);
  nlohmann::json doc = nlohmann::json::parse(embedded(sp));
  for (const auto& [ptr, value] : f.at("set").items()) {
    const nlohmann::json::json_pointer jp(ptr);
    if (!doc.contains(jp.parent_pointer()))
      throw std::runtime_error(id + ": figure " + f.value("figure", "") + " sets " + ptr + ", whose parent is not in " + sp);
    doc[jp] = value;
  }
  return parse_scenario(doc.dump(), sp + " with " + f.at("set").dump());
}

// The runs (scenario files, with their "set" overrides, as figure_scenario names them) and metrics
// of each validation case: a free parameter fitted on a case is fitted on these figures, so another
// case's figure of the same run and metric is a fitted figure too (a share of the same run's step is not).
std::map<std::string, std::set<std::string>> runs_of_cases() {
  std::map<std::string, std::set<std::string>> runs;
  for (const auto& [path, text] : embedded_files()) {
    if (path.rfind("scenarios/validation/", 0) != 0) continue;
    const nlohmann::json c = nlohmann::json::parse(text);
    if (!c.contains("figures")) continue;
    for (const auto& f : c.at("figures")) {
      if (!f.contains("scenario")) continue;
      const std::string sp = f.at("scenario");
      const std::string metric = f.value("metric", c.value("metric", "sustained_pflops"));
      runs[c.at("case")].insert((f.contains("set") ? sp + " with " + f.at("set").dump() : sp) + " | " + metric);
    }
  }
  return runs;
}

// A free parameter's "fitted_on": a case id, or "CASE: FIGURE, FIGURE" when it is fitted on some of
// the case's figures only (eager_copy_Bps on two of bagualu-breakdown's thirty shares). Returns the
// case and the figures (none: the whole case).
std::pair<std::string, std::set<std::string>> split_fitted_on(const std::string& fitted_on) {
  const auto colon = fitted_on.find(':');
  if (colon == std::string::npos) return {fitted_on, {}};
  std::set<std::string> figures;
  std::string rest = fitted_on.substr(colon + 1);
  for (size_t start = 0; start <= rest.size();) {
    size_t end = rest.find(',', start);
    if (end == std::string::npos) end = rest.size();
    std::string fig = rest.substr(start, end - start);
    fig.erase(0, fig.find_first_not_of(' '));
    fig.erase(fig.find_last_not_of(' ') + 1);
    if (!fig.empty()) figures.insert(fig);
    start = end + 1;
  }
  return {fitted_on.substr(0, colon), figures};
}

}  // namespace

nlohmann::json run_validation(const PredictOptions& o) {
  using nlohmann::json;
  json rows = json::array();
  std::map<std::string, json> predicted_by_scenario;  // one run per scenario file
  const auto runs = runs_of_cases();
  for (const auto& [path, text] : embedded_files()) {
    if (path.rfind("scenarios/validation/", 0) != 0) continue;
    const json c = json::parse(text);
    const std::string id = c.at("case");
    const std::string unit = c.value("unit", "");
    const std::string metric = c.value("metric", "sustained_pflops");
    if (!c.value("expressible", true)) {
      for (const auto& f : c.at("figures"))
        rows.push_back({{"case", id}, {"figure", f.at("figure")}, {"predicted", nullptr},
                        {"published", f.at("published")}, {"error_pct", nullptr}, {"role", "not expressible"},
                        {"unit", unit}, {"reason", c.at("reason")}});
      continue;
    }
    std::map<std::string, double> by_figure;
    for (const auto& f : c.at("figures")) {
      const std::string fig = f.at("figure");
      // A figure without "published" is an intermediate one (a throughput that a speed-up
      // divides): computed, not reported.
      const bool intermediate = !f.contains("published");
      const double published = intermediate ? 0.0 : f.at("published").get<double>();
      double predicted;
      std::string role = "predicted";
      const std::string fig_unit = f.value("unit", unit);
      if (f.contains("ratio_of")) {
        predicted = by_figure.at(f["ratio_of"][0]) / by_figure.at(f["ratio_of"][1]);
      } else if (f.contains("percent_of")) {  // a share of another figure, in percent
        predicted = 100.0 * by_figure.at(f["percent_of"][0]) / by_figure.at(f["percent_of"][1]);
      } else if (f.contains("efficiency_of")) {  // weak scaling: big / (scale x small), in percent
        predicted = 100.0 * by_figure.at(f["efficiency_of"][0]) /
                    (f.at("scale").get<double>() * by_figure.at(f["efficiency_of"][1]));
      } else {
        const Scenario sc = figure_scenario(f, id);
        // A memory figure needs no simulation (and is wanted also for plans that do not fit).
        PredictOptions fo = o;
        if (c.value("memory_only", false)) fo.memory_only = true;
        // Fitted: the run is the one a free parameter of the scenario is fitted on, whichever case
        // the figure belongs to (BaGuaLu's weak-scaling fp32@96000 is Table 5's fitted 1.93T run).
        for (const auto& a : sc.annotations) {
          if (a.kind != "free_parameter") continue;
          const auto [fit_case, fit_figures] = split_fitted_on(a.fitted_on);
          const auto fitted = runs.find(fit_case);
          const std::string run = sc.file + " | " + f.value("metric", metric);
          if (fit_case == id ? fit_figures.empty() || fit_figures.count(fig)
                             : fit_figures.empty() && !fo.memory_only && fitted != runs.end() && fitted->second.count(run))
            role = "fitted";
        }
        const std::string key = (fo.memory_only ? "memory:" : "") + sc.file;
        auto it = predicted_by_scenario.find(key);
        if (it == predicted_by_scenario.end()) {
          fmt::print(stderr, "validate: running {} ...\n", sc.file);
          it = predicted_by_scenario.emplace(key, predict_in_child(sc, fo)).first;
        }
        predicted = metric_of(it->second, f.value("metric", metric), id) * f.value("metric_scale", c.value("metric_scale", 1.0));
      }
      by_figure[fig] = predicted;
      if (intermediate) continue;
      json row{{"case", id}, {"figure", fig}, {"predicted", predicted}, {"published", published},
               {"error_pct", 100.0 * (predicted - published) / published}, {"role", role}, {"unit", fig_unit}};
      // A figure in percent (an efficiency) is judged by its difference in points.
      if (fig_unit == "percent") row["error_points"] = predicted - published;
      if (c.contains("note")) row["note"] = c.value("note", "");  // the case's caveat, for the report
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::string validation_table(const nlohmann::json& rows) {
  std::string s = fmt::format("{:<36} {:<16} {:>11} {:>11} {:>9}  {}\n", "case", "figure", "predicted", "published",
                              "error", "role");
  std::vector<double> errs, points;
  for (const auto& r : rows) {
    if (r["predicted"].is_null()) {
      s += fmt::format("{:<36} {:<16} {:>11} {:>11} {:>9}  not expressible: {}\n", r["case"].get<std::string>(),
                       r["figure"].get<std::string>(), "-", r["published"].dump(), "-", r["reason"].get<std::string>());
      continue;
    }
    if (r.contains("error_points")) {  // not a relative error: kept out of the error statistics
      if (r["role"] == "predicted") points.push_back(std::fabs(r["error_points"].get<double>()));
      s += fmt::format("{:<36} {:<16} {:>10.1f}% {:>10.1f}% {:>+6.1f}pts  {}\n", r["case"].get<std::string>(),
                       r["figure"].get<std::string>(), r["predicted"].get<double>(), r["published"].get<double>(),
                       r["error_points"].get<double>(), r["role"].get<std::string>());
      continue;
    }
    const double e = r["error_pct"];
    if (r["role"] == "predicted") errs.push_back(std::fabs(e));
    s += fmt::format("{:<36} {:<16} {:>11.4g} {:>11.4g} {:>+8.1f}%  {}\n", r["case"].get<std::string>(),
                     r["figure"].get<std::string>(), r["predicted"].get<double>(), r["published"].get<double>(), e,
                     r["role"].get<std::string>());
  }
  if (!errs.empty()) {
    std::sort(errs.begin(), errs.end());
    const double median = errs.size() % 2 ? errs[errs.size() / 2] : (errs[errs.size() / 2 - 1] + errs[errs.size() / 2]) / 2;
    size_t within = 0;
    for (double e : errs) within += e <= 10.0;
    s += fmt::format("predicted figures: {}, within 10 %: {}, median |error|: {:.1f} %\n", errs.size(), within, median);
  }
  if (!points.empty()) {  // shares and efficiencies, judged in points
    std::sort(points.begin(), points.end());
    size_t within = 0;
    for (double e : points) within += e <= 5.0;
    s += fmt::format("figures in percent: {}, within 5 points: {}, largest miss: {:.1f} points\n", points.size(), within,
                     points.back());
  }
  return s;
}

}  // namespace exasim
