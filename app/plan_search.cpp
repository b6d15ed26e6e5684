#include "app/plan_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "models/moe_routing.hpp"
#include "models/transformer.hpp"

namespace exasim {

using json = nlohmann::json;

namespace {
std::string reason_of(const ScenarioError& e) {
  return e.json_path().empty() ? e.expected() : e.json_path() + ": " + e.expected();
}
}  // namespace

bool plan_scenario_or_row(const SweepSpec& s, size_t plan, Scenario& sc, ojson& invalid_row, json* doc) {
  try {
    json d = plan_scenario(s, plan);
    sc = parse_scenario_doc(d, s.name + " plan " + std::to_string(plan));
    if (doc) *doc = std::move(d);
    return true;
  } catch (const ScenarioError& e) {
    invalid_row = failed_row(s, plan, "invalid", reason_of(e), "");  // pruned: never run
  } catch (const std::exception& e) {  // a pointer the plan's earlier values made impossible
    invalid_row = failed_row(s, plan, "invalid", e.what(), "");
  }
  return false;
}

ojson predict_row(const SweepSpec& s, size_t plan, const Scenario& sc, const PredictOptions& po, bool leave_to_exit) {
  const std::string mode = po.analytic ? "analytic" : "simulated";
  try {
    if (!leave_to_exit) return ok_row(s, plan, predict(sc, po));
    static std::optional<Prediction> kept;  // never destroyed: the child _exits (no static destructors)
    return ok_row(s, plan, kept.emplace(predict(sc, po)));
  } catch (const DoesNotFitError& e) {
    // The row names its plan already: the reason starts at the JSON path.
    std::string why = e.what();
    if (why.rfind(sc.file + ": ", 0) == 0) why.erase(0, sc.file.size() + 2);
    return failed_row(s, plan, "infeasible", why, mode);
  } catch (const ScenarioError& e) {
    return failed_row(s, plan, "invalid", reason_of(e), mode);
  } catch (const std::exception& e) {
    return failed_row(s, plan, "error", e.what(), mode);
  }
}

ojson formula_row(const SweepSpec& s, size_t plan, const Scenario& sc, const json& doc, FormulaTier& tier,
                  const PredictOptions& po) {
  try {
    std::string why;
    const Prediction p = tier.predict(sc, doc, why);
    if (why.empty()) return ok_row(s, plan, p);
    if (why.rfind(sc.file + ": ", 0) == 0) why.erase(0, sc.file.size() + 2);
    return failed_row(s, plan, "infeasible", why, "formula");
  } catch (const FormulaScopeError&) {
    return predict_row(s, plan, sc, po);
  } catch (const ScenarioError& e) {
    return failed_row(s, plan, "invalid", reason_of(e), "formula");
  } catch (const std::exception& e) {
    return failed_row(s, plan, "error", e.what(), "formula");
  }
}

ojson predict_row(const SweepSpec& s, size_t plan, const PredictOptions& po) {
  Scenario sc;
  ojson row;
  if (!plan_scenario_or_row(s, plan, sc, row)) return row;
  return predict_row(s, plan, sc, po);
}

}  // namespace exasim

namespace exasim {

namespace {

struct SearchSpace {
  std::vector<std::pair<std::string, std::vector<ojson>>> keys;  // plan key, candidates
  double headroom = 0;
};

std::vector<ojson> search_list(const ojson& search, const std::string& key, std::vector<ojson> fallback,
                               const std::string& file) {
  auto it = search.find(key);
  if (it == search.end()) return fallback;
  return expand_dimension(*it, file, "/search/" + key);
}

SearchSpace search_space(SweepSpec& s, const ojson& search, const std::string& file) {
  static const char* const known[] = {"devices", "global_batch", "memory_headroom", "top", "tensor_parallel",
                                      "pipeline_parallel", "virtual_stages", "micro_batch", "recompute", "zero_stage"};
  if (!search.is_object()) throw ScenarioError(file, "/search", "expected an object of constraints");
  for (const auto& it : search.items())
    if (std::find(std::begin(known), std::end(known), it.key()) == std::end(known))
      throw ScenarioError(file, "/search/" + escape_token(it.key()),
                          "unknown key (expected one of: devices, global_batch, memory_headroom, top, tensor_parallel, "
                          "pipeline_parallel, virtual_stages, micro_batch, recompute, zero_stage)");
  if (!s.base.contains("plan") || !s.base["plan"].is_object() || s.base["plan"].contains("layout"))
    throw ScenarioError(file, "/base", "expected a base scenario with a general parallel plan for a search");
  auto whole = [&](const char* key) {
    const ojson& v = search.at(key);
    if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > (1ll << 31))
      throw ScenarioError(file, std::string("/search/") + key, "expected a whole number of at least 1, got " + v.dump());
    return json(v.get<long long>());
  };
  if (search.contains("devices")) apply_pointer(s.base, "/plan/devices", whole("devices"));
  if (search.contains("global_batch")) apply_pointer(s.base, "/plan/global_batch", whole("global_batch"));
  if (search.contains("top")) s.top = static_cast<size_t>(whole("top").get<long long>());
  SearchSpace sp;
  if (auto it = search.find("memory_headroom"); it != search.end()) {
    if (!it->is_number() || !(it->get<double>() >= 0 && it->get<double>() < 1))
      throw ScenarioError(file, "/search/memory_headroom", "expected a fraction from 0 to below 1, got " + it->dump());
    sp.headroom = it->get<double>();
  }
  std::vector<ojson> pipelines;
  for (int p = 1; p <= 128; p *= 2) pipelines.push_back(p);
  sp.keys = {{"tensor_parallel", search_list(search, "tensor_parallel", {1, 2, 4, 8}, file)},
             {"pipeline_parallel", search_list(search, "pipeline_parallel", pipelines, file)},
             {"virtual_stages", search_list(search, "virtual_stages", {1, 2, 4}, file)},
             {"micro_batch", search_list(search, "micro_batch", {1, 2, 4, 8}, file)},
             {"recompute", search_list(search, "recompute", {"none", "selective", "full"}, file)},
             {"zero_stage", search_list(search, "zero_stage", {0, 1, 2, 3}, file)}};
  return sp;
}

// Why a combination is not kept: "" (kept), "invalid" or "memory".
// outside_plan: the combinations' common part, read once (parse_outside_plan), or none.
std::string judge_plan(const SweepSpec& s, const json& doc, double headroom,
                       const std::optional<Scenario>& outside_plan) {
  Scenario sc;
  try {
    // the document itself: no text to print and lex again
    sc = outside_plan ? parse_plan_variant(*outside_plan, doc) : parse_scenario_doc(doc, s.base_file);
    if (sc.plan_kind != Scenario::PlanKind::general || sc.model.is_convnet()) return "invalid";
    check_transformer_plan(sc.model, sc.training, sc.parallel);
  } catch (const std::exception&) {
    return "invalid";
  }
  const double tokens = double(sc.parallel.micro_batch) * sc.training.seq_len / sc.parallel.context;
  const MoeRouting moe = sc.model.dense() ? MoeRouting{} : moe_routing(sc.model, tokens, sc.parallel.expert);
  const DeviceMemory m = transformer_plan_memory(sc.model, sc.training, sc.parallel, moe);
  return m.total_bytes > (1 - headroom) * sc.machine.memory_bytes ? "memory" : "";
}

}  // namespace

void expand_search(SweepSpec& s, const ojson& search, const std::string& file) {
  const SearchSpace sp = search_space(s, search, file);
  std::vector<size_t> idx(sp.keys.size(), 0);
  std::vector<std::vector<ojson>> kept(sp.keys.size());
  size_t combos = 0, invalid = 0, memory = 0;
  std::optional<Scenario> outside_plan;
  try {
    outside_plan = parse_outside_plan(s.base, s.base_file);
  } catch (const std::exception&) {  // each combination's whole parse says why
  }
  // A combination is only judged: the base's annotations are not copied into each one.
  if (outside_plan) outside_plan->annotations.clear();
  json doc = s.base;  // every combination sets the same keys, so one document serves them all
  std::vector<std::string> pointers;
  std::vector<std::vector<json>> values(sp.keys.size());  // each candidate as the document's json
  for (size_t k = 0; k < sp.keys.size(); ++k) {
    pointers.push_back("/plan/" + sp.keys[k].first);
    for (const ojson& v : sp.keys[k].second) values[k].push_back(json::parse(v.dump()));
  }
  for (bool more = true; more;) {
    for (size_t k = 0; k < sp.keys.size(); ++k) apply_pointer(doc, pointers[k], values[k][idx[k]]);
    ++combos;
    const std::string why = judge_plan(s, doc, sp.headroom, outside_plan);
    if (why.empty())
      for (size_t k = 0; k < sp.keys.size(); ++k) kept[k].push_back(sp.keys[k].second[idx[k]]);
    (why == "invalid" ? invalid : memory) += why.empty() ? 0 : 1;
    more = false;  // the next combination, the last key fastest
    for (size_t k = sp.keys.size(); k-- > 0;) {
      if (++idx[k] < sp.keys[k].second.size()) {
        more = true;
        break;
      }
      idx[k] = 0;
    }
  }
  if (kept.front().empty())
    throw ScenarioError(file, "/search",
                        fmt::format("expected constraints that some plan meets: of {} combinations {} are invalid and {} "
                                    "leave less than the memory headroom free",
                                    combos, invalid, memory));
  s.search = true;
  for (size_t k = 0; k < sp.keys.size(); ++k) {
    SweepDimension d;
    d.pointer = "/plan/" + sp.keys[k].first;
    d.values = kept[k];
    d.leader = k == 0 ? -1 : 0;
    s.dimensions.push_back(std::move(d));
  }
  // Linked dimensions take their leader's value index: the leader lists each kept plan once.
  s.search_note = fmt::format("search: {} combinations, {} invalid, {} over the memory headroom ({:g} of each device's "
                              "memory kept free), {} plans kept",
                              combos, invalid, memory, sp.headroom, kept.front().size());
}

}  // namespace exasim
