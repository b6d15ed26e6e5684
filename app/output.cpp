#include "app/output.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace exasim {

void write_files_atomically(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create output directory '" + dir + "': " + ec.message());
  std::vector<std::pair<fs::path, fs::path>> staged;
  try {
    for (const auto& [name, content] : files) {
      const fs::path final_path = fs::path(dir) / name;
      const fs::path tmp = fs::path(dir) / ("." + name + ".tmp");
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << content;
      out.close();
      if (!out) throw std::runtime_error("cannot write '" + tmp.string() + "'");
      staged.emplace_back(tmp, final_path);
    }
  } catch (...) {
    for (auto& [tmp, fin] : staged) fs::remove(tmp, ec);
    throw;
  }
  for (auto& [tmp, fin] : staged) {
    fs::rename(tmp, fin, ec);
    if (ec) throw std::runtime_error("cannot rename into '" + fin.string() + "': " + ec.message());
  }
}

}  // namespace exasim
