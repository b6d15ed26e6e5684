// libFuzzer harness: the scenario reader (parse_scenario), as `exasim run FILE` reads a file.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  exasim::fuzz::guarded([&] { exasim::parse_scenario(text, "fuzz.json"); });
  return 0;
}
