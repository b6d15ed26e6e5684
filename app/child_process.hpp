// The one way exasim starts another program: fork + execvp, wait, exit status back.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace exasim {

struct ChildRun {
  // argv[0] is looked up on the PATH (execvp).
  std::vector<std::string> argv;
  // Set in the child only, before exec: (name, value).
  std::vector<std::pair<std::string, std::string>> env;
  // When given, the child's stdout and stderr (together) are read into it instead of inherited.
  std::string* output = nullptr;
};

// Runs it to the end and returns its exit status: 127 when it could not be started, 128 + N when
// signal N ended it. Flushes stdout and stderr first, so that the outputs keep their order.
int run_child(const ChildRun& run);

}  // namespace exasim
