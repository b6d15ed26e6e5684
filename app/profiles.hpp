// Which host profile costs the compute: the shipped one (embedded, so that `run` is
// deterministic and works from any directory), a file given with --profile, or an embedded one
// by name.
#pragma once
#include <memory>
#include <string>

#include "costs/host_profile.hpp"

namespace exasim {

inline constexpr const char* kDefaultHostProfile = "profiles/host-amd-epyc.json";

// "" -> the default; a readable file on disk; else an embedded profile by path or by name
// ("host-amd-epyc"). Throws ProfileError.
std::shared_ptr<const HostProfile> load_host_profile(const std::string& arg);

// An embedded profile by name ("device-h100-sxm5-80gb") or path ("profiles/..."), parsed once per
// process and shared. Throws ProfileError when none has that name.
std::shared_ptr<const HostProfile> load_embedded_profile(const std::string& name);

// Where `run --sample` keeps its samples: $XDG_CACHE_HOME/exasim/samples.json (or
// ~/.cache/...), the folder created if missing. Keys carry the CPU model, so hosts can share it.
std::string default_cache_path();

}  // namespace exasim
