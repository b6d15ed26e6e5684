#include "app/child_process.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>

namespace exasim {

namespace {
[[noreturn]] void fail(const char* what) { throw std::runtime_error(std::string(what) + ": " + std::strerror(errno)); }

// fork() once stdout and stderr are flushed (else the child would write their buffers again).
pid_t fork_flushed() {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) fail("fork");
  return pid;
}

int wait_for(pid_t pid) {
  const int status = wait_status(pid);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
}  // namespace

int wait_status(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) fail("waitpid");
  return status;
}

int wait_status(pid_t pid, ChildUsage& usage) {
  int status = 0;
  rusage ru{};
  while (wait4(pid, &status, 0, &ru) < 0)
    if (errno != EINTR) fail("wait4");
  const auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  usage.cpu_s = secs(ru.ru_utime) + secs(ru.ru_stime);
  usage.peak_rss_bytes = static_cast<double>(ru.ru_maxrss) * 1024.0;  // Linux: kilobytes
  return status;
}

bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string read_to_end(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  close(fd);
  return out;
}

ForkedChild fork_child(const std::function<int(int write_fd)>& body) {
  int fd[2];
  if (pipe2(fd, O_CLOEXEC) != 0) fail("pipe");
  const pid_t pid = fork_flushed();
  if (pid == 0) {
    close(fd[0]);
    int code = 1;
    try {
      code = body(fd[1]);
    } catch (...) {
    }
    _exit(code);
  }
  close(fd[1]);
  return {pid, fd[0]};
}

int run_child(const ChildRun& run) {
  if (run.argv.empty()) throw std::invalid_argument("run_child: no program");
  std::vector<std::string> args = run.argv;
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  int fd[2] = {-1, -1};
  if (run.output && pipe2(fd, O_CLOEXEC) != 0) fail("pipe");
  const pid_t pid = fork_flushed();
  if (pid == 0) {
    if (run.output) {
      dup2(fd[1], STDOUT_FILENO);
      dup2(fd[1], STDERR_FILENO);
    }
    for (const auto& [name, value] : run.env) setenv(name.c_str(), value.c_str(), 1);
    execvp(argv[0], argv.data());
    _exit(127);  // not found or not executable
  }
  if (run.output) {
    close(fd[1]);
    *run.output += read_to_end(fd[0]);
  }
  return wait_for(pid);
}

}  // namespace exasim
