// libFuzzer harness: `exasim run` on small machines. A scenario the reader accepts and that is small
// (at most 64 ranks, 16 layers, 64 micro-batches; larger ones are skipped, only for speed) is predicted
// in-process with the analytic estimate (step graphs, memory model, closed form: coverage guides the
// fuzzer there), then simulated on SimGrid in a child process (SimGrid runs one engine per process):
// a child killed by a signal (a crash or a sanitizer report) or running past 60 s is a finding.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>

#include "app/pipeline.hpp"
#include "app/profiles.hpp"
#include "tests/fuzz/fuzz_common.hpp"

namespace {

using exasim::Scenario;

bool small(const Scenario& sc) {
  const exasim::ModelSpec& m = sc.model;
  if (m.layers > 16 || sc.training.seq_len > 4096 || m.d_model > 8192 || m.d_ff > 32768 || m.experts_per_layer > 64)
    return false;
  if (sc.plan_kind == Scenario::PlanKind::moda)
    return sc.plan.nodes <= 64 && sc.training.micro_batches <= 16 && sc.training.micro_batch_per_node <= 64;
  const exasim::ParallelPlan& p = sc.parallel;
  const long long ranks = static_cast<long long>(p.data) * p.tensor * p.pipeline;
  const long long per_step = static_cast<long long>(p.micro_batch) * p.data;
  return ranks <= 64 && p.virtual_stages <= 8 && per_step > 0 && p.global_batch / per_step <= 64;
}

// The simulation in a child: exit 0 (predicted or refused) or 3 (another exception); a sanitizer's
// report exits 1 (AddressSanitizer, UndefinedBehaviorSanitizer) and a crash is a signal.
void simulate_in_child(const Scenario& sc, const exasim::PredictOptions& base) {
  const pid_t pid = fork();
  if (pid < 0) return;  // no process to spare: skip the simulation
  if (pid == 0) {
    exasim::PredictOptions o = base;
    o.analytic = false;
    bool refused_or_ok = true;
    exasim::fuzz::guarded([&] {
      try {
        exasim::predict(sc, o);
      } catch (const std::exception&) {
        refused_or_ok = false;
        throw;
      }
    });
    _exit(refused_or_ok ? 0 : 3);
  }
  int status = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(60)) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      exasim::fuzz::finding("the simulation ran past 60 s (a hang?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (WIFSIGNALED(status)) exasim::fuzz::finding("the simulation died of signal " + std::to_string(WTERMSIG(status)));
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 3)
    exasim::fuzz::finding("the simulation exited " + std::to_string(WEXITSTATUS(status)) + " (a sanitizer report?)");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const exasim::PredictOptions options = [] {
    exasim::PredictOptions o;
    o.host = std::make_shared<exasim::ProfileEfficiency>(exasim::load_host_profile(""));
    return o;
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  exasim::fuzz::guarded([&] {
    const Scenario sc = exasim::parse_scenario(text, "fuzz.json");
    if (!small(sc)) return;
    exasim::PredictOptions o = options;
    o.analytic = true;
    bool analytic_ok = false;
    exasim::fuzz::guarded([&] {
      exasim::predict(sc, o);
      analytic_ok = true;
    });
    if (analytic_ok) simulate_in_child(sc, options);
  });
  return 0;
}
