#include "app/child_process.hpp"

#include <fcntl.h>
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

int wait_for(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) fail("waitpid");
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
}  // namespace

int run_child(const ChildRun& run) {
  if (run.argv.empty()) throw std::invalid_argument("run_child: no program");
  std::vector<std::string> args = run.argv;
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  int fd[2] = {-1, -1};
  if (run.output && pipe2(fd, O_CLOEXEC) != 0) fail("pipe");
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) fail("fork");
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
    char buf[4096];
    ssize_t n;
    while ((n = read(fd[0], buf, sizeof buf)) != 0) {
      if (n > 0) run.output->append(buf, static_cast<size_t>(n));
      else if (errno != EINTR) break;
    }
    close(fd[0]);
  }
  return wait_for(pid);
}

}  // namespace exasim
