// libFuzzer harness: the sweep reader (parse_sweep, as `exasim sweep FILE` reads it), the scenarios
// of its first plans (each dimension's value applied to the base, then read as `run` would), and
// the reader of a sweep's results.jsonl (`sweep --resume`), all on the same input.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "app/sweep.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  exasim::fuzz::guarded([&] {
    const exasim::SweepSpec s = exasim::parse_sweep(text, "fuzz-sweep.json");
    const size_t plans = std::min<size_t>(s.plan_count(), 4);
    for (size_t i = 0; i < plans; ++i)
      exasim::fuzz::guarded([&] { exasim::parse_scenario(exasim::plan_scenario(s, i).dump(), "plan.json"); });
  });
  exasim::fuzz::guarded([&] { exasim::read_results_jsonl(text, "results.jsonl"); });
  return 0;
}
