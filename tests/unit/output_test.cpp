// Outputs are written whole or not at all (app/output.hpp): every file of a set is staged under a
// temporary name unique to the process, a failure removes the staged files and names the OS error,
// and no final file of the set is written unless all are.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "sim/files.hpp"

using namespace exasim;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("exasim-output-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t entries(const fs::path& d) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(d)) {
    (void)e;
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("outputs: a set of files in two folders is written whole") {
  const fs::path d = fresh_dir("whole");
  write_outputs({{(d / "a.json").string(), "A"}, {(d / "sub" / "b.json").string(), "B"}});
  CHECK(read(d / "a.json") == "A");
  CHECK(read(d / "sub" / "b.json") == "B");
  CHECK(entries(d) == 2);  // a.json and sub/: no temporary file left
  CHECK(entries(d / "sub") == 1);
  fs::remove_all(d);
}

TEST_CASE("outputs: a failing file leaves no file of the set and no temporary file, and names the OS error") {
  const fs::path d = fresh_dir("fail");
  const std::string too_long(300, 'x');  // NAME_MAX is 255: the second file's temporary cannot be created
  try {
    write_outputs({{(d / "report.json").string(), "R"}, {(d / too_long).string(), "T"}});
    FAIL("no error");
  } catch (const OutputError& e) {
    CHECK(std::string(e.what()).find("File name too long") != std::string::npos);
  }
  CHECK(entries(d) == 0);
  fs::remove_all(d);
}

TEST_CASE("outputs: a path that is a folder is refused before anything is written") {
  const fs::path d = fresh_dir("isdir");
  fs::create_directories(d / "trace.json");
  try {
    write_outputs({{(d / "report.json").string(), "R"}, {(d / "trace.json").string(), "T"}});
    FAIL("no error");
  } catch (const OutputError& e) {
    CHECK(std::string(e.what()).find("Is a directory") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(d / "report.json"));
  CHECK(entries(d) == 1);
  fs::remove_all(d);
}

TEST_CASE("outputs: check_writable_dir creates nothing and refuses a path under a regular file") {
  const fs::path d = fresh_dir("check");
  CHECK_NOTHROW(check_writable_dir((d / "x" / "y").string()));
  CHECK_FALSE(fs::exists(d / "x"));
  std::ofstream(d / "file") << "f";
  try {
    check_writable_dir((d / "file" / "out").string());
    FAIL("no error");
  } catch (const OutputError& e) {
    CHECK(std::string(e.what()).find("Not a directory") != std::string::npos);
  }
  fs::remove_all(d);
}
