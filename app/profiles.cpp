#include "app/profiles.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "app/embedded.hpp"

namespace exasim {

std::shared_ptr<const HostProfile> load_host_profile(const std::string& arg) {
  const auto& files = embedded_files();
  // The default is always the embedded profile: a file of that name in the working directory
  // is read only when --profile names it.
  if (arg.empty())
    return std::make_shared<const HostProfile>(
        parse_host_profile(files.at(kDefaultHostProfile), std::string("<embedded>/") + kDefaultHostProfile));
  const std::string& name = arg;
  if (FILE* f = std::fopen(name.c_str(), "r")) {
    std::fclose(f);
    return std::make_shared<const HostProfile>(load_host_profile_file(name));
  }
  if (const std::string key = embedded_key(name, "profiles/"); !key.empty())
    return std::make_shared<const HostProfile>(parse_host_profile(files.at(key), "<embedded>/" + key));
  std::string known;
  for (const auto& [path, text] : files)
    if (path.rfind("profiles/", 0) == 0) known += (known.empty() ? "" : ", ") + path;
  throw ProfileError(name, "", "cannot read the file, and no embedded profile has that name (embedded: " +
                                   (known.empty() ? std::string("none") : known) + ")");
}

std::shared_ptr<const HostProfile> load_embedded_profile(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const HostProfile>> loaded;
  const std::string key = embedded_key(name, "profiles/");
  if (key.empty()) {
    std::string known;
    for (const auto& [path, text] : embedded_files())
      if (path.rfind("profiles/", 0) == 0) known += (known.empty() ? "" : ", ") + path;
    throw ProfileError(name, "", "no embedded profile has that name (embedded: " + known + ")");
  }
  std::lock_guard<std::mutex> lock(mutex);
  auto& p = loaded[key];
  if (!p) p = std::make_shared<const HostProfile>(parse_host_profile(embedded_files().at(key), "<embedded>/" + key));
  return p;
}

std::string default_cache_path() {
  namespace fs = std::filesystem;
  fs::path base;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    base = x;
  else if (const char* h = std::getenv("HOME"); h && *h)
    base = fs::path(h) / ".cache";
  else
    base = ".";
  const fs::path dir = base / "exasim";
  fs::create_directories(dir);
  return (dir / "samples.json").string();
}

}  // namespace exasim
