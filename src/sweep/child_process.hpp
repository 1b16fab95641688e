#pragma once
// Runs the sweep's trainings as child processes of this binary, one at a time, so that a stop
// request reaches the running training: the trainer checkpoints on SIGINT/SIGTERM and exits 130.
// While a ChildRunner lives, SIGINT and SIGTERM do not end this process: run() passes them on to
// the child, and stop_requested() reports them between runs.
#include <csignal>
#include <string>
#include <vector>

namespace mt {

struct ChildResult {
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
};

class ChildRunner {
 public:
  ChildRunner();
  ~ChildRunner();
  ChildRunner(const ChildRunner&) = delete;
  ChildRunner& operator=(const ChildRunner&) = delete;

  // This executable (/proc/self/exe) with `args`; its output goes where this process's goes. A
  // SIGINT or SIGTERM to this process while it runs is passed on as SIGTERM (a terminal's
  // ctrl-C reaches both already).
  ChildResult run(const std::vector<std::string>& args);
  bool stop_requested();  // a SIGINT or SIGTERM has arrived

 private:
  int wake_[2] = {-1, -1};  // the pipe the signal handler writes to
  struct sigaction old_int_, old_term_, old_chld_;
  bool stop_ = false;
};

}  // namespace mt
