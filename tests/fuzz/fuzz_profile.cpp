// libFuzzer harness: the host-profile reader (parse_host_profile, as `run --profile FILE` reads it),
// then what the cost model asks of a profile (relative efficiencies at a few shapes), then the writer:
// a profile the reader accepted is written and read back (calibrate writes profiles with the same
// writer); in strict mode a profile its own reader refuses is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "costs/host_profile.hpp"
#include "tests/fuzz/fuzz_common.hpp"

namespace {

void use(const exasim::HostProfile& p) {
  for (const auto& [key, surface] : p.surfaces) {
    for (const double d : {1.0, 64.0, 4096.0, 1e9}) {
      exasim::KernelShape s;
      s.dims = {static_cast<std::int64_t>(d), static_cast<std::int64_t>(d), static_cast<std::int64_t>(d)};
      (void)p.relative_efficiency(key.first, key.second, s);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  exasim::fuzz::guarded([&] {
    const exasim::HostProfile p = exasim::parse_host_profile(text, "fuzz-profile.json");
    use(p);
    const std::string written = exasim::host_profile_json(p);
    try {
      exasim::parse_host_profile(written, "written.json");
    } catch (const exasim::ProfileError& e) {
      if (exasim::fuzz::strict()) exasim::fuzz::finding(std::string("the writer's profile is refused: ") + e.what());
    }
  });
  return 0;
}
