// Data files compiled into the binary (see CMakeLists.txt): path relative to the repo root -> text.
#pragma once
#include <map>
#include <string>

namespace exasim {
const std::map<std::string, std::string>& embedded_files();

// The key of an embedded file named by its path, by its path under `dir` ("scenarios/"), or by its
// stem there; "" when none is.
inline std::string embedded_key(const std::string& name, const std::string& dir) {
  const auto& files = embedded_files();
  for (const std::string& key : {name, dir + name, dir + name + ".json"})
    if (files.count(key)) return key;
  return "";
}
}
