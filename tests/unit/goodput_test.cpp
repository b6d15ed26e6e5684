// Goodput (models/goodput.hpp) against Young's and Daly's closed forms and Daly's own figures, the
// checkpoint's size against a hand count, and the scenario's "resilience" block end to end.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/pipeline.hpp"
#include "app/profiles.hpp"
#include "app/scenario.hpp"
#include "models/goodput.hpp"
#include "models/memory_model.hpp"
#include "tests/unit/approx.hpp"
#include "topologies/faults.hpp"

using namespace exasim;
using json = nlohmann::json;

TEST_CASE("goodput: Young's interval and Daly's higher-order optimum against Daly's Figs. 3-5") {
  const double min = 60, h = 3600;
  CHECK(young_interval_s(5 * min, 24 * h) == test::rel(120 * min));  // sqrt(2 x 5 x 1440) min
  // Daly (2006) Figs. 3, 4, 5: delta = 5 min, M = 24 h, 6 h, 15 min -> 117, 57 and 9.1 min.
  CHECK(daly_interval_s(5 * min, 24 * h) / min == test::rel(117, 0.005));
  CHECK(daly_interval_s(5 * min, 6 * h) / min == test::rel(57, 0.01));
  CHECK(daly_interval_s(5 * min, 15 * min) / min == test::rel(9.1, 0.01));
  // By hand for M = 24 h: xi = 5/2880, 120 (1 + sqrt(xi)/3 + xi/9) - 5 = 116.69 min.
  const double xi = 5.0 / 2880;
  CHECK(daly_interval_s(5 * min, 24 * h) / min == test::rel(120 * (1 + std::sqrt(xi) / 3 + xi / 9) - 5));
  // A checkpoint as long as twice the MTTI: checkpoint every M.
  CHECK(daly_interval_s(3 * h, 1 * h) == test::rel(1 * h));
}

TEST_CASE("goodput: Daly's wall-time model, its optimum and its first-order limit") {
  const double M = 10 * 3600, delta = 120, R = 600;
  const double tau = daly_interval_s(delta, M);
  // T_s / T_w = tau / (M e^{R/M} (e^{(tau + delta)/M} - 1)) by hand.
  CHECK(daly_goodput(tau, delta, R, M) ==
        test::rel(tau / (M * std::exp(R / M) * (std::exp((tau + delta) / M) - 1))));
  // Daly's tau is (nearly) the maximum: 10 % either side is worse.
  CHECK(daly_goodput(tau, delta, R, M) > daly_goodput(0.9 * tau, delta, R, M));
  CHECK(daly_goodput(tau, delta, R, M) > daly_goodput(1.1 * tau, delta, R, M));
  // delta, tau << M: 1 - goodput ~ delta/tau + (tau + delta)/(2M) + R/M (Young's first order).
  const double M2 = 1e9, d2 = 10, t2 = young_interval_s(d2, M2);
  CHECK(1 - daly_goodput(t2, d2, 0, M2) == test::rel(d2 / t2 + (t2 + d2) / (2 * M2), 1e-3));
}

TEST_CASE("goodput: the job's MTTI adds the components' failure rates") {
  ResilienceSpec r;
  r.node_mtbf_s = 1e8;
  const JobComponents c{1000, 2000, 10};
  CHECK(job_mtti_s(c, r) == test::rel(1e5));
  r.link_mtbf_s = 4e8;
  r.switch_mtbf_s = 1e7;
  // 1000/1e8 + 2000/4e8 + 10/1e7 = 1e-5 + 5e-6 + 1e-6
  CHECK(job_mtti_s(c, r) == test::rel(1 / 1.6e-5));
  r.node_mtbf_s = 0;
  CHECK_THROWS_AS(job_mtti_s(c, r), std::invalid_argument);
}

TEST_CASE("goodput: the interval is a whole number of steps, the given one or Daly's") {
  ResilienceSpec r;
  r.node_mtbf_s = 3.6e7;  // 1000 nodes: M = 36,000 s
  r.restart_s = 300;
  const JobComponents c{1000, 0, 0};
  const GoodputResult g = expected_goodput(r, c, 1e12, 1e10, 7.0);  // delta = 100 s
  CHECK(g.mtti_s == test::rel(36000));
  CHECK(g.checkpoint_write_s == test::rel(100));
  CHECK_FALSE(g.interval_given);
  CHECK(g.interval_steps == std::round(daly_interval_s(100, 36000) / 7.0));
  CHECK(g.interval_s == test::rel(g.interval_steps * 7.0));
  CHECK(g.goodput == test::rel(daly_goodput(g.interval_s, 100, 300, 36000)));
  r.checkpoint_interval_s = 1;  // shorter than a step: every step
  CHECK(expected_goodput(r, c, 1e12, 1e10, 7.0).interval_steps == 1);
}

TEST_CASE("goodput: the checkpoint holds each parameter's working copy and optimizer state once") {
  // fp32: 4 bytes of weights + 8 of Adam moments; fp16 mixed: 2 + 4 (master) + 8.
  CHECK(checkpoint_state_bytes(PrecisionPolicy::fp32, 1e9, 0, 0) == test::rel(12e9));
  CHECK(checkpoint_state_bytes(PrecisionPolicy::fp16, 1e9, 0, 0) == test::rel(14e9));
  // BaGuaLu's layer-wise mode: experts in half with fp32 masters, the rest fp32 without.
  CHECK(checkpoint_state_bytes(PrecisionPolicy::mixed, 1e9, 6e8, 0) == test::rel(4e8 * 12 + 6e8 * 14));
  // ... and its gates with the experts (half, fp32 master: 2 + 4 + 8); under fp32 a gate is shared.
  CHECK(checkpoint_state_bytes(PrecisionPolicy::mixed, 1e9, 6e8, 1e8) == test::rel(3e8 * 12 + 7e8 * 14));
  CHECK(checkpoint_state_bytes(PrecisionPolicy::fp32, 1e9, 6e8, 1e8) == test::rel(12e9));
  // Adafactor keeps no per-parameter moments (its factored statistics are not counted): 4 bytes each.
  CHECK(checkpoint_state_bytes(PrecisionPolicy::fp32, 1e9, 6e8, 1e8, Optimizer::adafactor) == test::rel(4e9));
}

TEST_CASE("goodput: a job's components per machine family") {
  MachineSpec sw;
  sw.family = "sunway";
  sw.nodes_per_supernode = 256;
  std::vector<int> moda;  // 240 nodes of each of 400 supernodes
  for (int sn = 0; sn < 400; ++sn)
    for (int i = 0; i < 240; ++i) moda.push_back(sn * 256 + i);
  const JobComponents s = job_components(sw, moda);
  CHECK(s.nodes == 96000);
  CHECK(s.links == 96000);
  CHECK(s.switches == 400);
  MachineSpec g;
  g.family = "gpu_cluster";
  g.gpu.gpus_per_node = 8;
  g.gpu.gpus_per_nic = 1;
  g.gpu.nodes_per_leaf_group = 20;
  g.gpu.rail_optimized = true;
  const auto first = [](int n) {
    std::vector<int> v(n);
    for (int i = 0; i < n; ++i) v[i] = i;
    return v;
  };
  const JobComponents gc = job_components(g, first(1024));  // 128 nodes in 7 scalable units
  CHECK(gc.nodes == 128);
  CHECK(gc.links == 1024);
  CHECK(gc.switches == 7 * 8);
  MachineSpec t;
  t.family = "torus";
  CHECK(job_components(t, first(1024)).links == 2048);
  CHECK(job_components(t, first(1024)).switches == 0);
}

namespace {
json resilient_scenario() {
  return json::parse(R"({
    "name": "resilient",
    "machine": {"name": "two-dgx", "family": "gpu_cluster", "nodes": 2, "gpus_per_node": 8, "device": "a100-sxm4-80gb",
                "nvlink_Bps": 300e9, "nvlink_latency_s": 1e-6, "nic_Bps": 25e9, "link_latency_s": 1e-6,
                "fat_tree": {"nodes_per_leaf_group": 2, "leaf_groups_per_spine_group": 1, "rail_optimized": true,
                             "leaf_taper": 1, "spine_taper": 1},
                "checkpoint_write_Bps": {"value": 1e9, "assumption": "test"}},
    "model": {"name": "gpt-4l", "layers": 4, "d_model": 1024, "heads": 16, "d_ff": 4096, "vocab": 256},
    "training": {"precision": "fp16", "seq_len": 512},
    "plan": {"data_parallel": 16, "micro_batch": 1, "global_batch": 16},
    "resilience": {"node_mtbf_s": 3.6e6, "restart_s": 60}
  })");
}
}  // namespace

TEST_CASE("goodput: a scenario's resilience block reaches the report") {
  PredictOptions o;
  o.host = std::make_shared<ProfileEfficiency>(load_host_profile(""));
  const Prediction p = predict(parse_scenario(resilient_scenario().dump(), "r.json"), o);
  REQUIRE(p.goodput);
  // 2 nodes: M = 1.8e6 s; 14 bytes per parameter at 1 GB/s.
  CHECK(p.goodput->mtti_s == test::rel(1.8e6));
  CHECK(p.goodput->checkpoint_bytes == test::rel(14 * p.parameters));
  CHECK(p.goodput->checkpoint_write_s == test::rel(14 * p.parameters / 1e9));
  const json r = report_json(p);
  CHECK(r.at("goodput").get<double>() == test::rel(p.goodput->goodput));
  CHECK(r.at("effective_tokens_per_s").get<double>() == test::rel(p.tokens_per_s * p.goodput->goodput));
  CHECK(p.goodput->goodput < 1);
  CHECK(p.goodput->goodput > 0.99);
}

TEST_CASE("goodput: bad resilience input is refused at its JSON path") {
  json j = resilient_scenario();
  j["resilience"]["node_mtbf_s"] = -1;
  CHECK_THROWS_WITH_AS(parse_scenario(j.dump(), "r.json"), doctest::Contains("/resilience/node_mtbf_s"), ScenarioError);
  j = resilient_scenario();
  j["resilience"]["mtbf"] = 1;
  CHECK_THROWS_WITH_AS(parse_scenario(j.dump(), "r.json"), doctest::Contains("/resilience/mtbf"), ScenarioError);
  j = resilient_scenario();
  j["machine"].erase("checkpoint_write_Bps");
  CHECK_THROWS_WITH_AS(parse_scenario(j.dump(), "r.json"), doctest::Contains("/machine/checkpoint_write_Bps"),
                       ScenarioError);
  j = resilient_scenario();
  j.erase("resilience");  // without the block the machine's key is not needed
  j["machine"].erase("checkpoint_write_Bps");
  CHECK_FALSE(parse_scenario(j.dump(), "r.json").resilience);
}
