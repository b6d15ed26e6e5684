// Data files compiled into the binary (see CMakeLists.txt): path relative to the repo root -> text.
#pragma once
#include <map>
#include <string>

namespace exasim {
const std::map<std::string, std::string>& embedded_files();
}
