// Scenario parser: a valid scenario's values, and one clear error per kind of bad input.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/embedded.hpp"
#include "app/scenario.hpp"
#include "tests/unit/approx.hpp"

using exasim::parse_scenario;
using exasim::ScenarioError;
using exasim::test::rel;
using json = nlohmann::json;

namespace {

// A valid scenario with an inline machine (no dependency on the embedded machine files).
json valid_scenario() {
  return json::parse(R"({
    "name": "tiny-moe",
    "description": "a small test scenario",
    "machine": {
      "name": "test-machine",
      "family": "sunway",
      "nodes_per_supernode": 256,
      "supernodes": 4,
      "core_groups_per_node": 6,
      "device": {
        "name": "test-device",
        "peak_flops_per_s": {"fp64": 14.0e12, "fp32": 14.0e12, "fp16": 55.0e12},
        "gemm_efficiency": {"fp32": 0.8, "fp16": 0.7},
        "memory_bandwidth_Bps": 249.0e9,
        "optimizer_memory_bandwidth_Bps": 45.0e9,
        "memory_bytes": 96.0e9
      },
      "noc_Bps": 200.0e9,
      "upper_level_bandwidth_ratio": 0.1875,
      "node_injection_Bps": {"value": 16.0e9, "source": "fitted to the 1-supernode run", "fitted_on": "case-a"},
      "link_latency_s": {"value": 1.0e-6, "assumption": "typical for the fabric"},
      "sources": {"peak": "the machine paper, table 1"}
    },
    "model": {"name": "m", "layers": 4, "d_model": 512, "heads": 8, "d_ff": 2048, "experts_per_layer": 8},
    "training": {
      "seq_len": {"value": 1024, "assumption": "not stated in the paper"},
      "micro_batch_per_node": 2,
      "precision": "mixed"
    },
    "plan": {"layout": "moda", "nodes": 64, "nodes_per_supernode_used": 32, "paro": true}
  })");
}

struct Caught {
  bool thrown = false;
  std::string file, path, expected, message;
};

Caught error_of(const std::string& text) {
  try {
    (void)parse_scenario(text, "t.json");
  } catch (const ScenarioError& e) {
    return {true, e.file(), e.json_path(), e.expected(), e.what()};
  }
  return {};
}

Caught error_of(const json& j) { return error_of(j.dump()); }

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("scenario: a valid inline scenario parses with its values and defaults") {
  const exasim::Scenario s = parse_scenario(valid_scenario().dump(), "t.json");
  CHECK(s.file == "t.json");
  CHECK(s.name == "tiny-moe");
  CHECK(s.description == "a small test scenario");

  CHECK(s.machine.name == "test-machine");
  CHECK(s.machine.family == "sunway");
  CHECK(s.machine.nodes_per_supernode == 256);
  CHECK(s.machine.supernodes == 4);
  CHECK(s.machine.core_groups_per_node == 6);
  CHECK(s.machine.peak_flops_per_s.size() == 3);
  CHECK(s.machine.peak_flops_per_s.at(exasim::Precision::fp16) == rel(55.0e12));
  CHECK(s.machine.gemm_efficiency.size() == 2);
  CHECK(s.machine.gemm_efficiency.at(exasim::Precision::fp32) == rel(0.8));
  CHECK(s.machine.gemm_efficiency.count(exasim::Precision::fp64) == 0);
  CHECK(s.machine.memory_bandwidth_Bps == rel(249.0e9));
  CHECK(s.machine.optimizer_memory_bandwidth_Bps == rel(45.0e9));
  CHECK(s.machine.memory_bytes == rel(96.0e9));
  CHECK(s.machine.noc_Bps == rel(200.0e9));
  CHECK(s.machine.upper_level_bandwidth_ratio == rel(0.1875));
  CHECK(s.machine.node_injection_Bps == rel(16.0e9));
  CHECK(s.machine.link_latency_s == rel(1.0e-6));

  CHECK(s.model.name == "m");
  CHECK(s.model.layers == 4);
  CHECK(s.model.d_model == 512);
  CHECK(s.model.heads == 8);
  CHECK(s.model.d_ff == 2048);
  CHECK(s.model.experts_per_layer == 8);
  CHECK(s.model.top_k == 1);  // default

  CHECK(s.training.seq_len == 1024);
  CHECK(s.training.micro_batch_per_node == 2);
  CHECK(s.training.micro_batches == 1);  // default
  CHECK(s.training.precision == exasim::PrecisionPolicy::mixed);
  CHECK(s.training.grad_sync == exasim::GradSync::after_backward);  // default

  CHECK(s.plan.layout == exasim::Layout::moda);
  CHECK(s.plan.nodes == 64);
  CHECK(s.plan.nodes_per_supernode_used == 32);
  CHECK(s.plan.paro == true);
  CHECK(s.plan.all_to_all == exasim::CollectiveAlgorithm::pairwise);  // default
  CHECK(s.fidelity == exasim::Fidelity::folded);                      // default

  REQUIRE(s.annotations.size() == 3);
  const exasim::Annotation* inj = nullptr;
  const exasim::Annotation* lat = nullptr;
  const exasim::Annotation* seq = nullptr;
  for (const auto& a : s.annotations) {
    if (a.json_path == "/machine/node_injection_Bps") inj = &a;
    if (a.json_path == "/machine/link_latency_s") lat = &a;
    if (a.json_path == "/training/seq_len") seq = &a;
  }
  REQUIRE(inj != nullptr);
  REQUIRE(lat != nullptr);
  REQUIRE(seq != nullptr);
  CHECK(inj->kind == "free_parameter");
  CHECK(inj->value == rel(16.0e9));
  CHECK(inj->reason == "fitted to the 1-supernode run");
  CHECK(inj->fitted_on == "case-a");
  CHECK(lat->kind == "assumption");
  CHECK(lat->reason == "typical for the fabric");
  CHECK(lat->fitted_on.empty());
  CHECK(seq->kind == "assumption");
  CHECK(seq->value == rel(1024));
  CHECK(seq->reason == "not stated in the paper");
}

TEST_CASE("scenario: explicit optional values override the defaults") {
  json j = valid_scenario();
  j["model"]["top_k"] = 2;
  j["training"]["micro_batches"] = 4;
  j["training"]["grad_sync"] = "overlap";
  j["training"]["precision"] = "fp32";
  j["plan"]["all_to_all"] = "direct";
  j["plan"]["layout"] = "inverse";  // 8 experts tile 32 nodes per supernode
  j["plan"]["paro"] = false;
  j["engine"] = {{"fidelity", "exhaustive"}};
  j["machine"]["node_injection_Bps"] = {{"value", 8e9}, {"source", "a guess"}, {"fitted_on", ""}};
  const exasim::Scenario s = parse_scenario(j.dump(), "t.json");
  CHECK(s.model.top_k == 2);
  CHECK(s.training.micro_batches == 4);
  CHECK(s.training.grad_sync == exasim::GradSync::overlap);
  CHECK(s.training.precision == exasim::PrecisionPolicy::fp32);
  CHECK(s.plan.all_to_all == exasim::CollectiveAlgorithm::direct);
  CHECK(s.plan.layout == exasim::Layout::inverse);
  CHECK(s.plan.paro == false);
  CHECK(s.fidelity == exasim::Fidelity::exhaustive);
  CHECK(s.machine.node_injection_Bps == rel(8e9));
  CHECK(std::string(exasim::to_string(s.plan.layout)) == "inverse");
  CHECK(std::string(exasim::to_string(s.training.grad_sync)) == "overlap");
  CHECK(std::string(exasim::to_string(s.training.precision)) == "fp32");
}

TEST_CASE("scenario error: JSON syntax error") {
  const Caught c = error_of(std::string("{\"name\": \"x\",, }"));
  CHECK(c.thrown);
  CHECK(c.file == "t.json");
  CHECK(c.path == "");
  CHECK(contains(c.message, "valid JSON"));
  CHECK(contains(c.message, "byte 14"));
}

TEST_CASE("scenario error: top level is not an object") {
  const Caught c = error_of(std::string("[1, 2]"));
  CHECK(c.thrown);
  CHECK(c.path == "");
  CHECK(contains(c.message, "top level"));
  CHECK(contains(c.message, "an array"));
}

TEST_CASE("scenario error: duplicate key") {
  std::string text = valid_scenario().dump();
  text.insert(1, "\"name\": \"first\", ");
  const Caught c = error_of(text);
  CHECK(c.thrown);
  CHECK(c.path == "/name");
  CHECK(contains(c.message, "duplicate key"));
}

TEST_CASE("scenario error: unknown key") {
  json j = valid_scenario();
  j["plan"]["nodez"] = 64;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/plan/nodez");
  CHECK(c.message ==
        "t.json: /plan/nodez: unknown key (expected one of: layout, nodes, nodes_per_supernode_used, paro, "
        "all_to_all)");
}

TEST_CASE("scenario error: unknown key in the machine object") {
  json j = valid_scenario();
  j["machine"]["gpus"] = 4;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/machine/gpus");
  CHECK(contains(c.message, "unknown key"));
  CHECK(contains(c.message, "node_injection_Bps"));
}

TEST_CASE("scenario error: missing required key") {
  json j = valid_scenario();
  j["model"].erase("layers");
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/model/layers");
  CHECK(c.message == "t.json: /model/layers: missing (expected a positive integer)");
}

TEST_CASE("scenario error: missing fp32 peak") {
  json j = valid_scenario();
  j["machine"]["device"]["peak_flops_per_s"].erase("fp32");
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/machine/device/peak_flops_per_s/fp32");
  CHECK(contains(c.message, "missing (expected a positive number)"));
}

TEST_CASE("scenario error: negative integer") {
  json j = valid_scenario();
  j["plan"]["nodes"] = -3;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/plan/nodes");
  CHECK(c.message == "t.json: /plan/nodes: expected a positive integer, got -3");
}

TEST_CASE("scenario error: non-integer where an integer goes") {
  json j = valid_scenario();
  j["model"]["d_ff"] = 2.5;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/model/d_ff");
  CHECK(contains(c.message, "expected a positive integer, got 2.5"));
}

TEST_CASE("scenario error: integer too large") {
  json j = valid_scenario();
  j["model"]["layers"] = 5000000000LL;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/model/layers");
  CHECK(contains(c.message, "no larger than 2147483647"));
}

TEST_CASE("scenario error: string where a number goes") {
  json j = valid_scenario();
  j["model"]["heads"] = "eight";
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/model/heads");
  CHECK(contains(c.message, "expected a positive integer, got a string (\"eight\")"));
}

TEST_CASE("scenario error: string where a boolean goes") {
  json j = valid_scenario();
  j["plan"]["paro"] = "yes";
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/plan/paro");
  CHECK(contains(c.message, "expected a boolean"));
  CHECK(contains(c.message, "got a string"));
}

TEST_CASE("scenario error: fraction out of range") {
  json j = valid_scenario();
  j["machine"]["device"]["gemm_efficiency"]["fp32"] = 1.5;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/machine/device/gemm_efficiency/fp32");
  CHECK(contains(c.message, "expected a number in (0, 1], got 1.5"));
}

TEST_CASE("scenario error: negative latency") {
  json j = valid_scenario();
  j["machine"]["link_latency_s"] = -1e-6;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/machine/link_latency_s");
  CHECK(contains(c.message, "expected a non-negative number"));
}

TEST_CASE("scenario error: enum value not in the list") {
  json j = valid_scenario();
  j["training"]["precision"] = "fp16";
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/training/precision");
  CHECK(contains(c.message, "expected one of \"fp32\", \"mixed\", \"layerwise\", \"apex_o1\", \"apex_o2\", got \"fp16\""));
}

TEST_CASE("scenario error: engine fidelity not in the list") {
  json j = valid_scenario();
  j["engine"] = {{"fidelity", "fast"}};
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/engine/fidelity");
  CHECK(contains(c.message, "\"folded\", \"exhaustive\""));
}

TEST_CASE("scenario error: machine family not sunway") {
  json j = valid_scenario();
  j["machine"]["family"] = "fugaku";
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/machine/family");
  CHECK(contains(c.message, "\"sunway\""));
}

TEST_CASE("scenario error: non-string citation in machine sources") {
  json j = valid_scenario();
  j["machine"]["sources"]["peak"] = 3;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/machine/sources/peak");
  CHECK(contains(c.message, "expected a string"));
}

TEST_CASE("scenario error: unknown machine name lists the embedded machines") {
  json j = valid_scenario();
  j["machine"] = "no-such-machine-xyz";
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/machine");
  CHECK(contains(c.message, "\"no-such-machine-xyz\""));
  CHECK(contains(c.message, "topologies/machines/"));
  const std::string dir = "topologies/machines/";
  int listed = 0;
  for (const auto& [path, text] : exasim::embedded_files()) {
    (void)text;
    if (path.rfind(dir, 0) != 0 || path.size() < dir.size() + 5) continue;
    if (path.compare(path.size() - 5, 5, ".json") != 0) continue;
    const std::string stem = path.substr(dir.size(), path.size() - dir.size() - 5);
    if (stem.find('/') != std::string::npos) continue;
    CHECK_MESSAGE(contains(c.message, "\"" + stem + "\""), "machine " << stem << " not listed");
    ++listed;
  }
  if (listed == 0) CHECK(contains(c.message, "none are embedded"));
}

TEST_CASE("scenario error: annotated value without value") {
  json j = valid_scenario();
  j["training"]["seq_len"] = {{"assumption", "a reason"}};
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/training/seq_len/value");
  CHECK(contains(c.message, "missing (expected a positive integer)"));
}

TEST_CASE("scenario error: annotated value with an empty assumption") {
  json j = valid_scenario();
  j["training"]["seq_len"] = {{"value", 1024}, {"assumption", ""}};
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/training/seq_len/assumption");
  CHECK(contains(c.message, "non-empty string"));
}

TEST_CASE("scenario error: annotated value with both assumption and source") {
  json j = valid_scenario();
  j["training"]["seq_len"] = {{"value", 1024}, {"assumption", "a"}, {"source", "b"}};
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/training/seq_len");
  CHECK(contains(c.message, "not both"));
}

TEST_CASE("scenario error: annotated value with neither assumption nor source") {
  json j = valid_scenario();
  j["machine"]["noc_Bps"] = {{"value", 1e9}};
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/machine/noc_Bps");
  CHECK(contains(c.message, "\"assumption\""));
  CHECK(contains(c.message, "\"source\""));
}

TEST_CASE("scenario error: annotated value with an unknown key") {
  json j = valid_scenario();
  j["training"]["seq_len"] = {{"value", 1024}, {"assumption", "a"}, {"note", "x"}};
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/training/seq_len/note");
  CHECK(contains(c.message, "unknown key (expected one of: value, assumption, source, fitted_on)"));
}

TEST_CASE("scenario: an annotated choice is parsed and recorded as an assumption") {
  json j = valid_scenario();
  j["plan"]["all_to_all"] = {{"value", "direct"}, {"assumption", "posts all sends at once"}};
  const exasim::Scenario s = parse_scenario(j.dump(), "t.json");
  CHECK(s.plan.all_to_all == exasim::CollectiveAlgorithm::direct);
  bool recorded = false;
  for (const auto& a : s.annotations)
    if (a.json_path == "/plan/all_to_all") {
      recorded = true;
      CHECK(a.kind == "assumption");
      CHECK(a.value == "direct");
      CHECK(a.reason == "posts all sends at once");
    }
  CHECK(recorded);
}

TEST_CASE("scenario error: annotated choice not in the list") {
  json j = valid_scenario();
  j["plan"]["all_to_all"] = {{"value", "bruck"}, {"assumption", "a"}};
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/plan/all_to_all/value");
  CHECK(contains(c.message, "expected one of \"pairwise\", \"direct\", \"hierarchical\", got \"bruck\""));
}

TEST_CASE("scenario error: annotated integer with a fractional value") {
  json j = valid_scenario();
  j["training"]["seq_len"] = {{"value", 10.5}, {"assumption", "a"}};
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/training/seq_len/value");
  CHECK(contains(c.message, "expected a positive integer, got 10.5"));
}

TEST_CASE("scenario error: d_model not divisible by heads") {
  json j = valid_scenario();
  j["model"]["heads"] = 7;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/model/heads");
  CHECK(contains(c.message, "divisor of d_model (512)"));
}

TEST_CASE("scenario error: top_k above experts_per_layer") {
  json j = valid_scenario();
  j["model"]["top_k"] = 9;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/model/top_k");
  CHECK(contains(c.message, "at most experts_per_layer (8), got 9"));
}

TEST_CASE("scenario error: mixed precision on a machine without fp16") {
  json j = valid_scenario();
  j["machine"]["device"]["gemm_efficiency"].erase("fp16");
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/training/precision");
  CHECK(contains(c.message, "gemm_efficiency.fp16"));
}

TEST_CASE("scenario error: more nodes per supernode than the machine has") {
  json j = valid_scenario();
  j["plan"]["nodes_per_supernode_used"] = 512;
  j["plan"]["nodes"] = 512;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/plan/nodes_per_supernode_used");
  CHECK(contains(c.message, "nodes_per_supernode (256), got 512"));
}

TEST_CASE("scenario error: nodes do not fill whole supernodes") {
  json j = valid_scenario();
  j["plan"]["nodes"] = 72;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/plan/nodes");
  CHECK(contains(c.message, "nodes must fill whole supernodes: 72 is not a multiple of 32"));
}

TEST_CASE("scenario error: plan needs more supernodes than the machine has") {
  json j = valid_scenario();
  j["plan"]["nodes"] = 256;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/plan/nodes");
  CHECK(contains(c.message, "the plan needs 8 supernodes, the machine has 4"));
}

TEST_CASE("scenario error: more experts than nodes") {
  json j = valid_scenario();
  j["model"]["experts_per_layer"] = 64;
  j["plan"]["nodes"] = 32;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/plan/nodes");
  CHECK(contains(c.message, "more experts than nodes"));
}

TEST_CASE("scenario error: nodes not a multiple of experts_per_layer") {
  json j = valid_scenario();
  j["plan"]["nodes"] = 36;
  j["plan"]["nodes_per_supernode_used"] = 12;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/plan/nodes");
  CHECK(contains(c.message, "expected a multiple of experts_per_layer (8)"));
  CHECK(contains(c.message, "replicas per expert"));
}

TEST_CASE("scenario error: ParO with a single replica per expert") {
  json j = valid_scenario();
  j["plan"]["nodes"] = 8;
  j["plan"]["nodes_per_supernode_used"] = 8;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/plan/paro");
  CHECK(contains(c.message, "set paro to false"));
  j["plan"]["paro"] = false;
  CHECK_NOTHROW((void)parse_scenario(j.dump(), "t.json"));
}

TEST_CASE("scenario error: MoDa replicas do not tile supernodes") {
  json j = valid_scenario();
  j["plan"]["nodes"] = 48;  // 6 replicas per expert; 16 nodes per supernode
  j["plan"]["nodes_per_supernode_used"] = 16;
  Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/plan/layout");
  CHECK(contains(c.message, "to divide nodes_per_supernode_used (16)"));
  CHECK(contains(c.message, "must tile supernodes"));

  j["model"]["experts_per_layer"] = 2;  // 24 replicas per expert spanning supernodes of 16
  c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/plan/layout");
  CHECK(contains(c.message, "to be a multiple of nodes_per_supernode_used (16)"));
}

TEST_CASE("scenario error: inverse layout experts do not tile supernodes") {
  json j = valid_scenario();
  j["plan"]["layout"] = "inverse";
  j["plan"]["nodes"] = 48;  // 8 experts; 12 nodes per supernode
  j["plan"]["nodes_per_supernode_used"] = 12;
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/plan/layout");
  CHECK(contains(c.message, "layout inverse"));
  CHECK(contains(c.message, "experts_per_layer (8)"));
  // The same plan is fine under MoDa: its 6 replicas per expert divide 12.
  j["plan"]["layout"] = "moda";
  CHECK_NOTHROW((void)parse_scenario(j.dump(), "t.json"));
}

TEST_CASE("scenario error: unreadable file") {
  const std::string path = "/nonexistent-dir-exasim/none.json";
  try {
    (void)exasim::load_scenario_file(path);
    FAIL("no ScenarioError thrown");
  } catch (const ScenarioError& e) {
    CHECK(e.file() == path);
    CHECK(e.json_path() == "");
    CHECK(std::string(e.what()).find("readable file") != std::string::npos);
  }
}

TEST_CASE("scenario: an embedded machine names its device, whose annotated values are recorded under /machine/device") {
  json j = valid_scenario();
  j["machine"] = "sunway-oceanlight";
  const exasim::Scenario s = exasim::parse_scenario(j.dump(), "t.json");
  CHECK(s.machine.device_name == "SW26010-Pro");
  CHECK(s.machine.peak_flops_per_s.at(exasim::Precision::fp16) == rel(55.30e12));
  // The optimizer bandwidth is derived (an assumption), the machine's two network values fitted.
  bool derived = false, overhead = false, copy = false, limit = false, injection = false;
  for (const auto& a : s.annotations) {
    if (a.json_path == "/machine/device/optimizer_memory_bandwidth_Bps") derived = a.kind == "assumption";
    if (a.json_path == "/machine/message_overhead_s") overhead = a.fitted_on == "bagualu-table5-174t-fp32";
    if (a.json_path == "/machine/eager_copy_Bps") copy = a.fitted_on == "bagualu-breakdown: 1.93t-fp32 fwd_comm, 1.93t-fp32 bwd_comm";
    if (a.json_path == "/machine/eager_limit_bytes") limit = a.kind == "assumption";
    // Fitted on the one case that identifies it: the inverse mapping's ParO crosses the 16:3 level.
    if (a.json_path == "/machine/node_injection_Bps")
      injection = a.fitted_on == "bagualu-moda-vs-inverse-mapping: inverse";
  }
  CHECK(derived);
  CHECK(injection);
  CHECK(overhead);
  CHECK(copy);
  CHECK(limit);
  CHECK(s.machine.message_overhead_s == rel(5.43e-7));
  CHECK(s.machine.eager_limit_bytes == 12288);
  CHECK(s.machine.eager_copy_Bps == rel(1.816e9));
  // Not given: derived from the eager protocol, 12,288 B / 1.816 GB/s / (2 x 4 links) = 0.8458 us.
  CHECK(s.machine.link_latency_s == rel(0.8458e-6, 1e-3));
  CHECK(s.machine.optimizer_memory_bandwidth_Bps == rel(240.2e9 * 28 / 84, 1e-3));
}

// A Sunway machine's link latency: given, or derived from the eager protocol's limit and copy rate
// (limit / rate = one round trip over the four links across supernodes): 12,288 B / 2 GB/s / 8 =
// 0.768 us. Without either, refused at /machine/link_latency_s.
TEST_CASE("scenario: a sunway machine's link latency is given or derived from its eager limit") {
  json j = valid_scenario();
  j["machine"]["eager_limit_bytes"] = json{{"value", 12288}, {"assumption", "an MPI default"}};
  j["machine"]["eager_copy_Bps"] = json{{"value", 2e9}, {"assumption", "a copy rate"}};
  CHECK(exasim::parse_scenario(j.dump(), "t.json").machine.link_latency_s == rel(1.0e-6));
  j["machine"].erase("link_latency_s");
  CHECK(exasim::parse_scenario(j.dump(), "t.json").machine.link_latency_s == rel(0.768e-6));
  j["machine"].erase("eager_limit_bytes");
  j["machine"].erase("eager_copy_Bps");
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/machine/link_latency_s");
}

TEST_CASE("scenario error: an unknown device name") {
  json j = valid_scenario();
  j["machine"]["device"] = "no-such-chip";
  const Caught c = error_of(j);
  CHECK(c.thrown);
  CHECK(c.path == "/machine/device");
  CHECK(contains(c.message, "sw26010-pro"));
}

TEST_CASE("scenario: every embedded device file parses, with its sources and assumptions") {
  for (const char* name : {"sw26010-pro", "v100-sxm2-32gb", "a100-sxm4-80gb", "h100-sxm5-80gb", "tpu-v3"}) {
    CAPTURE(name);
    json j = valid_scenario();
    j["machine"]["device"] = name;
    const exasim::Scenario s = exasim::parse_scenario(j.dump(), "t.json");
    CHECK(s.machine.peak_flops_per_s.at(exasim::Precision::fp16) > 50e12);
    CHECK(s.machine.memory_bandwidth_Bps > 200e9);
  }
}

TEST_CASE("scenario: MoDa precision modes, mixed is layerwise, bf16 and unknown modes are refused with the list") {
  json j = valid_scenario();
  j["training"]["precision"] = "layerwise";
  CHECK(exasim::parse_scenario(j.dump(), "t.json").training.precision == exasim::PrecisionPolicy::mixed);
  j["training"]["precision"] = "apex_o1";
  CHECK(exasim::parse_scenario(j.dump(), "t.json").training.precision == exasim::PrecisionPolicy::apex_o1);
  j["training"]["precision"] = "apex_o2";
  CHECK(exasim::parse_scenario(j.dump(), "t.json").training.precision == exasim::PrecisionPolicy::apex_o2);
  for (const char* bad : {"bf16", "fp8", "half"}) {
    CAPTURE(bad);
    j["training"]["precision"] = bad;
    const Caught c = error_of(j);
    CHECK(c.thrown);
    CHECK(contains(c.message, "/training/precision"));
    CHECK(contains(c.message, "\"layerwise\", \"apex_o1\", \"apex_o2\""));
  }
}
