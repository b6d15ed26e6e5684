// The one way exasim starts another process: another program (run_child: fork + execvp, wait, exit
// status back), or a forked copy of this one that sends its result through a pipe (fork_child: a
// SimGrid engine per process, so validate and sweep predict each scenario in one).
#pragma once
#include <sys/types.h>

#include <functional>
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

// A forked copy of this process: it runs `body` with the write end of a pipe (close-on-exec) and
// exits with body's return value (1 if it throws) through _exit; the parent gets the child's pid
// and the read end, which it reads to its end and closes, then waits for the child (wait_status).
struct ForkedChild {
  pid_t pid = -1;
  int read_fd = -1;
};
ForkedChild fork_child(const std::function<int(int write_fd)>& body);

// The child's wait status (waitpid, EINTR retried): WIFSIGNALED, WEXITSTATUS and so on apply.
int wait_status(pid_t pid);

// What a reaped child used: its CPU seconds (user + system) and peak resident memory (that of its
// largest descendant where one was larger), from wait4.
struct ChildUsage {
  double cpu_s = 0;
  double peak_rss_bytes = 0;
};
// As wait_status, and fills `usage`.
int wait_status(pid_t pid, ChildUsage& usage);

// Writes the whole of `data` to `fd` (EINTR retried); false when a write fails.
bool write_all(int fd, const std::string& data);

// Reads `fd` to its end (EINTR retried) and closes it.
std::string read_to_end(int fd);

}  // namespace exasim
