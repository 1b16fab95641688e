#include "sweep/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/error.hpp"

extern char** environ;

namespace mt {

namespace {

// The handler reaches only static storage: the write end of the runner's pipe. Each signal
// leaves a byte there ('s' stop, 'c' a child changed state), so a wait on the pipe never misses
// one, whichever thread the signal lands on (OpenBLAS starts threads of its own).
int g_wake_fd = -1;

void wake(int sig) {
  const int saved = errno;
  const char c = sig == SIGCHLD ? 'c' : 's';
  [[maybe_unused]] const ssize_t n = write(g_wake_fd, &c, 1);  // fails only when the pipe is full of wake-ups
  errno = saved;
}

}  // namespace

ChildRunner::ChildRunner() {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0)
    throw UserError(std::string("sweep: cannot create a pipe: ") + std::strerror(errno));
  g_wake_fd = wake_[1];
  struct sigaction sa{};
  sa.sa_handler = wake;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
  sigaction(SIGCHLD, &sa, &old_chld_);
}

ChildRunner::~ChildRunner() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGCHLD, &old_chld_, nullptr);
  g_wake_fd = -1;
  close(wake_[0]);
  close(wake_[1]);
}

bool ChildRunner::stop_requested() {
  char buf[64];
  for (ssize_t n; (n = read(wake_[0], buf, sizeof buf)) > 0;)
    for (ssize_t i = 0; i < n; ++i) stop_ = stop_ || buf[i] == 's';
  return stop_;
}

ChildResult ChildRunner::run(const std::vector<std::string>& args) {
  std::vector<std::string> words{"/proc/self/exe"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);  // what this process printed comes before the child's output
  pid_t pid = 0;
  if (const int err = posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ); err != 0)
    throw UserError(std::string("sweep: cannot start a training process: ") + std::strerror(err));

  bool passed_on = false;
  for (;;) {
    if (stop_requested() && !passed_on) {
      kill(pid, SIGTERM);
      passed_on = true;
    }
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      if (WIFSIGNALED(status)) return {.signal = WTERMSIG(status)};
      if (WIFEXITED(status)) return {.exit_code = WEXITSTATUS(status)};
    }
    if (done < 0 && errno != EINTR)
      throw UserError(std::string("sweep: waiting for a training process: ") + std::strerror(errno));
    // Sleeps until a signal leaves a byte in the pipe: the child's end, or a stop request.
    pollfd p{wake_[0], POLLIN, 0};
    poll(&p, 1, -1);
  }
}

}  // namespace mt
