// Sweeps: the plan space (product order, ranges), pointer application, row formatting (CSV
// quoting), reading a torn results.jsonl, and a resumed sweep writing the same files.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <sys/mman.h>
#include <sys/wait.h>
#include <cstring>
#include "app/child_process.hpp"
#include "app/profiles.hpp"
#include "app/scenario.hpp"
#include "app/sweep.hpp"
#include "tests/unit/approx.hpp"

using namespace exasim;
using json = nlohmann::json;

namespace {

json small_base() {
  return json::parse(R"({
    "name": "sweep-base",
    "machine": "sunway-oceanlight",
    "model": {"name": "gpt", "layers": 4, "d_model": 256, "heads": 8, "d_ff": 1024, "vocab": 1024},
    "training": {"seq_len": 128, "precision": "fp16"},
    "plan": {"devices": 16, "tensor_parallel": 1, "pipeline_parallel": 1, "micro_batch": 1, "global_batch": 32}
  })");
}

std::string sweep_text(const std::string& dimensions, const std::string& extra = "") {
  return R"({"name": "t", "base": )" + small_base().dump() + R"(, "dimensions": )" + dimensions + extra + "}";
}

std::vector<long long> ints(const std::vector<ojson>& v) {
  std::vector<long long> out;
  for (const auto& x : v) out.push_back(x.get<long long>());
  return out;
}

std::pair<std::string, std::string> sweep_error(const std::string& text) {
  try {
    (void)parse_sweep(text, "s.json");
  } catch (const ScenarioError& e) {
    return {e.json_path(), e.expected()};
  }
  return {"", "no error"};
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("sweep: ranges expand to lists") {
  CHECK(ints(expand_dimension(ojson::parse("[1, 2, 4]"), "f", "/d")) == std::vector<long long>{1, 2, 4});
  CHECK(ints(expand_dimension(ojson::parse(R"({"from": 1, "to": 8, "times": 2})"), "f", "/d")) ==
        std::vector<long long>{1, 2, 4, 8});
  CHECK(ints(expand_dimension(ojson::parse(R"({"from": 3, "to": 20, "times": 2})"), "f", "/d")) ==
        std::vector<long long>{3, 6, 12});
  CHECK(ints(expand_dimension(ojson::parse(R"({"from": 1, "to": 4, "step": 1})"), "f", "/d")) ==
        std::vector<long long>{1, 2, 3, 4});
  CHECK(ints(expand_dimension(ojson::parse(R"({"from": 2, "to": 9, "step": 3})"), "f", "/d")) ==
        std::vector<long long>{2, 5, 8});
  // Integer ranges stay integers (they print as 4, not 4.0); a fractional step gives numbers
  // computed from the start, not accumulated.
  const auto f = expand_dimension(ojson::parse(R"({"from": 0.1, "to": 0.3, "step": 0.1})"), "f", "/d");
  REQUIRE(f.size() == 3);
  CHECK(f[2].get<double>() == test::rel(0.3));
  CHECK(expand_dimension(ojson::parse(R"({"from": 1, "to": 4, "times": 2})"), "f", "/d")[2].dump() == "4");
  // Any JSON value may be a list element.
  CHECK(expand_dimension(ojson::parse(R"(["selective", "full"])"), "f", "/d").size() == 2);

  struct Bad {
    const char* v;
    const char* path;
    const char* part;
  };
  const Bad bad[] = {{"[]", "/d", "got an empty list"},
                     {"4", "/d", "got a number"},
                     {"\"x\"", "/d", "got a string"},
                     {R"({"from": 4, "to": 1, "step": 1})", "/d", "non-empty range"},
                     {R"({"from": 1, "to": 8, "times": 1})", "/d/times", "greater than 1"},
                     {R"({"from": 0, "to": 8, "times": 2})", "/d/from", "positive start"},
                     {R"({"from": 1, "to": 8, "step": 0})", "/d/step", "positive step"},
                     {R"({"from": 1, "to": 8})", "/d", "either \"times\" or \"step\""},
                     {R"({"from": 1, "to": 8, "step": 1, "times": 2})", "/d", "either"},
                     {R"({"from": "1", "to": 8, "step": 1})", "/d/from", "a number"},
                     {R"({"from": 1, "upto": 8, "step": 1})", "/d/upto", "unknown key"}};
  for (const Bad& b : bad) {
    CAPTURE(b.v);
    try {
      (void)expand_dimension(ojson::parse(b.v), "f.json", "/d");
      FAIL("no error");
    } catch (const ScenarioError& e) {
      CHECK(e.file() == "f.json");
      CHECK(e.json_path() == b.path);
      CHECK(e.expected().find(b.part) != std::string::npos);
    }
  }
}

TEST_CASE("sweep: plan ids enumerate the product, first dimension outermost") {
  const SweepSpec s = parse_sweep(
      sweep_text(R"({"/plan/tensor_parallel": [1, 2], "/plan/pipeline_parallel": {"from": 1, "to": 4, "times": 2},
                     "/plan/micro_batch": [1, 2]})"),
      "s.json");
  REQUIRE(s.dimensions.size() == 3);
  CHECK(s.dimensions[0].pointer == "/plan/tensor_parallel");  // the file's order, not sorted
  CHECK(s.dimensions[1].pointer == "/plan/pipeline_parallel");
  CHECK(s.plan_count() == 12);
  CHECK(plan_indices(s, 0) == std::vector<size_t>{0, 0, 0});
  CHECK(plan_indices(s, 1) == std::vector<size_t>{0, 0, 1});
  CHECK(plan_indices(s, 2) == std::vector<size_t>{0, 1, 0});
  CHECK(plan_indices(s, 6) == std::vector<size_t>{1, 0, 0});
  CHECK(plan_indices(s, 11) == std::vector<size_t>{1, 2, 1});
  std::set<std::vector<size_t>> seen;
  for (size_t i = 0; i < s.plan_count(); ++i) seen.insert(plan_indices(s, i));
  CHECK(seen.size() == 12);
  // A plan is the base with its values applied, and parses as a scenario.
  const json p7 = plan_scenario(s, 7);  // tensor 2, pipeline 1, micro-batch 2
  CHECK(p7["plan"]["tensor_parallel"] == 2);
  CHECK(p7["plan"]["pipeline_parallel"] == 1);
  CHECK(p7["plan"]["micro_batch"] == 2);
  const Scenario sc = parse_scenario(p7.dump(), "p7");
  CHECK(sc.parallel.data == 8);
  CHECK(s.rank_by == "tokens_per_s");
  CHECK(larger_is_better("tokens_per_s"));
  CHECK_FALSE(larger_is_better("step_time_s"));
}

TEST_CASE("sweep: a linked dimension follows its leader and adds no plans") {
  const SweepSpec s = parse_sweep(
      sweep_text(R"({"/plan/micro_batch": [1, 2], "/plan/devices": [16, 32, 64],
                     "/plan/global_batch": {"with": "/plan/devices", "values": {"from": 32, "to": 128, "times": 2}}})",
                 R"(, "validation": "bagualu-weak-scaling")"),
      "s.json");
  REQUIRE(s.dimensions.size() == 3);
  CHECK(s.dimensions[2].leader == 1);
  CHECK(s.plan_count() == 6);  // 2 x 3: the linked global batch multiplies nothing
  CHECK(s.validation == "bagualu-weak-scaling");
  for (size_t plan = 0; plan < s.plan_count(); ++plan) {
    CAPTURE(plan);
    const auto idx = plan_indices(s, plan);
    CHECK(idx[0] == plan / 3);
    CHECK(idx[1] == plan % 3);
    CHECK(idx[2] == idx[1]);
    const json doc = plan_scenario(s, plan);
    CHECK(doc["plan"]["global_batch"].get<int>() == 2 * doc["plan"]["devices"].get<int>());  // 32 with 16, ...
  }
  // Errors: a leader that is not an earlier free dimension, a different count, a stray key, an unknown case.
  auto err = [](const std::string& dims, const std::string& extra = "") { return sweep_error(sweep_text(dims, extra)); };
  CHECK(err(R"({"/plan/global_batch": {"with": "/plan/devices", "values": [32]}, "/plan/devices": [16]})").first ==
        "/dimensions/~1plan~1global_batch/with");
  CHECK(err(R"({"/plan/devices": [16, 32], "/plan/global_batch": {"with": "/plan/devices", "values": [32]}})") ==
        std::pair<std::string, std::string>{"/dimensions/~1plan~1global_batch/values",
                                            "expected 2 values, one per value of /plan/devices, got 1"});
  CHECK(err(R"({"/plan/devices": [16], "/plan/global_batch": {"with": "/plan/devices", "values": [32], "x": 1}})").first ==
        "/dimensions/~1plan~1global_batch/x");
  CHECK(err(R"({"/plan/devices": [16], "/plan/global_batch": {"with": "/plan/devices"}})").second.find("values") !=
        std::string::npos);
  CHECK(err(R"({"/plan/devices": [16]})", R"(, "validation": "no-such-case")").first == "/validation");
  // The shipped weak-scaling sweep: 2 precisions x 5 machine sizes, experts growing with the nodes.
  const SweepSpec w = load_sweep("bagualu-weak-scaling");
  CHECK(w.plan_count() == 10);
  const json last = plan_scenario(w, 9);
  CHECK(last["plan"]["nodes"] == 96000);
  CHECK(last["model"]["experts_per_layer"] == 400);
  CHECK(last["training"]["precision"] == "mixed");
}

TEST_CASE("sweep: JSON pointers replace values of the scenario") {
  json doc = small_base();
  apply_pointer(doc, "/plan/tensor_parallel", 4);
  CHECK(doc["plan"]["tensor_parallel"] == 4);
  apply_pointer(doc, "/plan/recompute", "full");  // a key the base leaves out
  CHECK(doc["plan"]["recompute"] == "full");
  apply_pointer(doc, "/model/layers", json{{"value", 8}, {"assumption", "why"}});
  CHECK(doc["model"]["layers"]["value"] == 8);
  // Devices and a data-parallel size exclude each other: setting one drops the other.
  apply_pointer(doc, "/plan/data_parallel", 2);
  CHECK_FALSE(doc["plan"].contains("devices"));
  apply_pointer(doc, "/plan/devices", 64);
  CHECK_FALSE(doc["plan"].contains("data_parallel"));
  CHECK(doc["plan"]["devices"] == 64);
  doc["plan"]["placement"] = {"tensor", "data", "pipeline"};
  apply_pointer(doc, "/plan/placement/1", "pipeline");
  CHECK(doc["plan"]["placement"][1] == "pipeline");
  CHECK_THROWS(apply_pointer(doc, "/nothing/here", 1));
  CHECK_THROWS(apply_pointer(doc, "/plan/placement/7", 1));
}

TEST_CASE("sweep: bad sweep files name the JSON path") {
  CHECK(sweep_error(R"({"name": "t", "dimensions": {"/plan/micro_batch": [1]}})").first == "/base");
  CHECK(sweep_error(R"({"base": "no-such-scenario", "dimensions": {"/plan/micro_batch": [1]}})").first == "/base");
  CHECK(sweep_error(sweep_text(R"({})")).first == "/dimensions");
  CHECK(sweep_error(sweep_text(R"([1, 2])")).first == "/dimensions");
  const auto typo = sweep_error(sweep_text(R"({"/plan/tensor_paralel": [1, 2]})"));
  CHECK(typo.first == "/dimensions/~1plan~1tensor_paralel");
  CHECK(typo.second.find("unknown key") != std::string::npos);
  CHECK(sweep_error(sweep_text(R"({"/plann/x": [1]})")).first == "/dimensions/~1plann~1x");
  CHECK(sweep_error(sweep_text(R"({"plan/x": [1]})")).second.find("JSON pointer") != std::string::npos);
  CHECK(sweep_error(sweep_text(R"({"/plan/micro_batch": []})")).first == "/dimensions/~1plan~1micro_batch");
  CHECK(sweep_error(sweep_text(R"({"/plan/micro_batch": 2})")).first == "/dimensions/~1plan~1micro_batch");
  CHECK(sweep_error(sweep_text(R"({"/plan/micro_batch": [1]})", R"(, "rank_by": "speed")")).first == "/rank_by");
  CHECK(sweep_error(sweep_text(R"({"/plan/micro_batch": [1]})", R"(, "bogus": 1)")).first == "/bogus");
  // An optional key the base leaves out, and a device count where the base gives data_parallel.
  CHECK(sweep_error(sweep_text(R"({"/plan/recompute": ["none", "full"], "/plan/data_parallel": [1, 2]})")).second ==
        "no error");
  // The embedded sweep parses (its base is an embedded scenario).
  const SweepSpec g = load_sweep("gpt-175b-a100-1024");
  CHECK(g.plan_count() == 4 * 6 * 2 * 3 * 2 * 2);
  CHECK(g.base_file == "<embedded>/scenarios/gpt3-175b-a100-1024.json");
}

TEST_CASE("sweep: rows and CSV quoting") {
  const SweepSpec s = parse_sweep(sweep_text(R"({"/plan/recompute": ["none", "full"], "/plan/micro_batch": [1, 2]})"),
                                  "s.json");
  CHECK(csv_header(s) ==
        "plan,status,/plan/recompute,/plan/micro_batch,mode,step_time_s,tokens_per_s,model_tflops_per_device,"
        "sustained_pflops,model_pflops,forward_compute_s,forward_communication_s,backward_compute_s,"
        "backward_communication_s,optimizer_s,idle_s,reason\n");
  const ojson r = failed_row(s, 3, "invalid", "/plan/global_batch: expected a multiple of \"x\", got 30", "");
  CHECK(row_line(r) ==
        R"({"plan":3,"status":"invalid","/plan/recompute":"full","/plan/micro_batch":2,"reason":"/plan/global_batch: expected a multiple of \"x\", got 30"})"
        "\n");
  CHECK(csv_line(s, r) == "3,invalid,full,2,,,,,,,,,,,,,\"/plan/global_batch: expected a multiple of \"\"x\"\", got 30\"\n");
  CHECK(csv_field("plain") == "plain");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_field("two\nlines") == "\"two\nlines\"");
  // A row line is one line whatever the reason holds.
  const ojson m = failed_row(s, 0, "error", "line one\nline two", "simulated");
  const std::string line = row_line(m);
  CHECK(line.find('\n') == line.size() - 1);
  CHECK(m["mode"] == "simulated");
}

TEST_CASE("sweep: reading a torn results.jsonl") {
  const std::string a = R"({"plan":0,"status":"ok"})"
                        "\n";
  const std::string b = R"({"plan":1,"status":"invalid","reason":"r"})"
                        "\n";
  JsonlContents c = read_results_jsonl(a + b, "r.jsonl");
  CHECK(c.rows.size() == 2);
  CHECK_FALSE(c.torn);
  CHECK(c.good_bytes == a.size() + b.size());
  // A last line cut short (no newline) is torn, whether or not what is there parses.
  c = read_results_jsonl(a + b + R"({"plan":2,"sta)", "r.jsonl");
  CHECK(c.rows.size() == 2);
  CHECK(c.torn);
  CHECK(c.good_bytes == a.size() + b.size());
  c = read_results_jsonl(a + R"({"plan":2,"status":"ok"})", "r.jsonl");
  CHECK(c.rows.size() == 1);
  CHECK(c.torn);
  CHECK(c.good_bytes == a.size());
  c = read_results_jsonl("", "r.jsonl");
  CHECK(c.rows.empty());
  CHECK_FALSE(c.torn);
  // A bad line before the last is not an interruption: refused, naming the line.
  try {
    (void)read_results_jsonl(a + "garbage\n" + b, "r.jsonl");
    FAIL("no error");
  } catch (const ScenarioError& e) {
    CHECK(e.json_path() == "line 2");
  }
  // Nor is a whole last line (its newline written) that does not parse, e.g. a number past double's
  // range: refused naming the file and the line, not a bare library error.
  try {
    (void)read_results_jsonl(a + R"({"plan":1,"status":"ok","step_time_s":1e400})" + "\n", "r.jsonl");
    FAIL("no error");
  } catch (const ScenarioError& e) {
    CHECK(e.file() == "r.jsonl");
    CHECK(e.json_path() == "line 2");
    CHECK(e.expected().find("1e400") != std::string::npos);
  }
}

TEST_CASE("sweep: a sweep resumed after a torn row writes the same files") {
  namespace fs = std::filesystem;
  const SweepSpec s = parse_sweep(
      sweep_text(R"({"/plan/tensor_parallel": [1, 2, 16], "/plan/pipeline_parallel": [1, 2], "/plan/micro_batch": [1, 2]})"),
      "s.json");
  const fs::path dir = fs::temp_directory_path() / ("exasim-sweep-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  SweepOptions o;
  o.analytic = true;  // fast: the closed-form estimate
  o.jobs = 2;
  o.predict.host = std::make_shared<ProfileEfficiency>(load_host_profile(""));
  o.out_dir = (dir / "full").string();
  std::ostringstream out;
  CHECK(run_sweep(s, o, out) == 0);
  const std::string jsonl = slurp(dir / "full" / "results.jsonl");
  const std::string csv = slurp(dir / "full" / "results.csv");
  const JsonlContents full = read_results_jsonl(jsonl, "full");
  REQUIRE(full.rows.size() == 12);
  for (size_t i = 0; i < 12; ++i) CHECK(full.rows[i]["plan"] == i);
  // tensor 16 does not divide the 8 heads: invalid, with its reason.
  CHECK(full.rows[8]["status"] == "invalid");
  CHECK(full.rows[8]["reason"].get<std::string>().find("/plan/tensor_parallel") == 0);
  CHECK(full.rows[0]["status"] == "ok");
  CHECK(full.rows[0]["mode"] == "analytic");
  CHECK(out.str().find("12 plans in") != std::string::npos);

  // Without --resume an existing results file is refused.
  CHECK_THROWS_AS(run_sweep(s, o, out), ScenarioError);

  // Interrupted: five whole rows, half of the sixth, and a CSV out of step (and sweep.json, which
  // a sweep writes before its first row).
  o.out_dir = (dir / "cut").string();
  fs::create_directories(dir / "cut");
  fs::copy_file(dir / "full" / "sweep.json", dir / "cut" / "sweep.json");
  size_t cut = 0;
  for (int i = 0; i < 5; ++i) cut = jsonl.find('\n', cut) + 1;
  std::ofstream(dir / "cut" / "results.jsonl", std::ios::binary) << jsonl.substr(0, cut + 20);
  std::ofstream(dir / "cut" / "results.csv", std::ios::binary) << csv.substr(0, 300);
  o.resume = true;
  o.jobs = 1;
  std::ostringstream out2;
  CHECK(run_sweep(s, o, out2) == 0);
  CHECK(slurp(dir / "cut" / "results.jsonl") == jsonl);
  CHECK(slurp(dir / "cut" / "results.csv") == csv);
  CHECK(out2.str().find("7 plans in") != std::string::npos);
  CHECK(out2.str().find("5 more were already in results.jsonl") != std::string::npos);

  // Rows of another sweep are refused.
  const SweepSpec other =
      parse_sweep(sweep_text(R"({"/plan/tensor_parallel": [1, 2, 4], "/plan/pipeline_parallel": [1, 2], "/plan/micro_batch": [1, 2]})"),
                  "other.json");
  CHECK_THROWS_AS(run_sweep(other, o, out2), ScenarioError);
  // So are rows of a sweep with the same dimensions over another base scenario: sweep.json's
  // fingerprint covers the base's content.
  SweepSpec other_base = s;
  other_base.base["training"]["seq_len"] = 512;
  try {
    (void)run_sweep(other_base, o, out2);
    FAIL("no error");
  } catch (const ScenarioError& e) {
    CHECK(e.json_path() == "/fingerprint");
    CHECK(e.file() == (dir / "cut" / "sweep.json").string());
  }
  // And rows whose sweep.json is missing: which sweep wrote them cannot be told.
  fs::remove(dir / "cut" / "sweep.json");
  CHECK_THROWS_AS(run_sweep(s, o, out2), ScenarioError);
  fs::remove_all(dir);
}

// The simulated stage reports each child's CPU seconds and its peak memory (the largest plan's) from
// wait4: a child that touches 64 MiB of fresh memory has a peak of at least that.
TEST_CASE("wait_status reports a forked child's CPU seconds and peak resident memory") {
  const size_t bytes = size_t{64} << 20;
  const exasim::ForkedChild c = exasim::fork_child([&](int fd) -> int {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 3;
    std::memset(p, 1, bytes);
    return exasim::write_all(fd, "done\n") ? 0 : 4;
  });
  const std::string out = exasim::read_to_end(c.read_fd);
  exasim::ChildUsage used;
  const int status = exasim::wait_status(c.pid, used);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(out == "done\n");
  CHECK(used.peak_rss_bytes >= static_cast<double>(bytes));
  CHECK(used.cpu_s >= 0);
}

TEST_CASE("search: a combination read on the base's common part is the whole parse's, invalid ones alike") {
  const std::string file = std::string(EXASIM_SOURCE_DIR) + "/scenarios/gpt3-175b-a100-1024.json";
  std::ifstream in(file);
  const json base = json::parse(in);
  const std::optional<Scenario> outside = parse_outside_plan(base, file);
  REQUIRE(outside.has_value());
  // tensor 8 / pipeline 16 (the base), tensor 3 (1,024 devices do not split), micro-batch 5 (1,536 is
  // not a multiple of 5 x 8), virtual stages 3 (96 layers over 48 chunks: not whole), ZeRO 3 selective.
  const std::vector<json> plans = {json::object(),
                                   {{"tensor_parallel", 3}},
                                   {{"micro_batch", 5}},
                                   {{"virtual_stages", 3}},
                                   {{"zero_stage", 3}, {"recompute", "selective"}, {"pipeline_parallel", 8}}};
  int valid = 0, invalid = 0;
  for (const json& change : plans) {
    json doc = base;
    for (const auto& [k, v] : change.items()) doc["plan"][k] = v;
    std::string whole_error, variant_error;
    Scenario whole, variant;
    try {
      whole = parse_scenario_doc(doc, file);
    } catch (const ScenarioError& e) {
      whole_error = e.what();
    }
    try {
      variant = parse_plan_variant(*outside, doc);
    } catch (const ScenarioError& e) {
      variant_error = e.what();
    }
    CHECK(variant_error == whole_error);
    if (!whole_error.empty()) {
      ++invalid;
      continue;
    }
    ++valid;
    CHECK(variant.parallel.devices() == whole.parallel.devices());
    CHECK(variant.parallel.tensor == whole.parallel.tensor);
    CHECK(variant.parallel.pipeline == whole.parallel.pipeline);
    CHECK(variant.parallel.virtual_stages == whole.parallel.virtual_stages);
    CHECK(variant.parallel.micro_batches() == whole.parallel.micro_batches());
    CHECK(variant.parallel.zero_stage == whole.parallel.zero_stage);
    CHECK(variant.parallel.recompute == whole.parallel.recompute);
    CHECK(variant.machine.memory_bytes == whole.machine.memory_bytes);
    CHECK(variant.training.seq_len == whole.training.seq_len);
    CHECK(variant.model.layers == whole.model.layers);
  }
  CHECK(valid >= 2);
  CHECK(invalid >= 2);
  json faulty = base;
  faulty["faults"] = json::object();
  CHECK_FALSE(parse_outside_plan(faulty, file).has_value());  // the machine may change: parse whole
}
