// Shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.cpp, run by tools/fuzz).
//
// A finding is what the command line would not survive: a crash, a sanitizer report, a hang (libFuzzer's
// -timeout), or an exception that is not a std::exception. A bad input refused with ScenarioError,
// ProfileError or DoesNotFitError (exit 2 with the file and JSON path) is the expected outcome. Any
// other std::exception (exasim exits 1 with a bare message) is accepted unless EXASIM_FUZZ_STRICT=1,
// which turns it into a finding too (it aborts, so libFuzzer saves the input).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

#include "app/scenario.hpp"
#include "costs/host_profile.hpp"
#include "models/memory_model.hpp"

namespace exasim::fuzz {

inline bool strict() {
  static const bool s = [] {
    const char* v = std::getenv("EXASIM_FUZZ_STRICT");
    return v != nullptr && std::string(v) == "1";
  }();
  return s;
}

// A finding: print it and abort, so that libFuzzer records the input as a crash.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "exasim fuzz: FINDING: %s\n", what.c_str());
  std::abort();
}

// Runs f; refusals are fine, other exceptions are findings in strict mode.
template <class F>
void guarded(F&& f) {
  try {
    f();
  } catch (const ScenarioError&) {
  } catch (const ProfileError&) {
  } catch (const DoesNotFitError&) {
  } catch (const std::exception& e) {
    if (strict()) finding(std::string("exit 1 instead of a refusal: ") + typeid(e).name() + ": " + e.what());
  }
}

}  // namespace exasim::fuzz
