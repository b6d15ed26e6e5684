// Output files are written whole or not at all: each goes to a temporary name in the same
// directory and is renamed into place only after every file of the set has been written.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace exasim {
// Writes all (relative name, content) pairs into dir (created if missing). Throws on failure,
// leaving none of the named files half-written.
void write_files_atomically(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files);
}
