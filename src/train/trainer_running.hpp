#pragma once
// What Trainer::run() keeps between its parts (trainer_open.cpp, trainer_run.cpp).
#include <chrono>
#include <optional>
#include <string>

#include "io/checkpoint.hpp"
#include "io/run_lock.hpp"
#include "io/run_log.hpp"
#include "train/progress.hpp"
#include "train/trainer.hpp"

namespace mt {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Trainer::Running {
  TrainState state;
  std::optional<RunLock> lock;       // the first rank's, while the run lasts
  std::optional<RunLog> log;         // the first rank's
  std::optional<Progress> progress;  // where this rank prints
  std::string last_checkpoint;       // the newest, named when the run stops early
  long long last = 0;                // the step this invocation stops after
  double flops_per_token = 0;
  double peak = 0;  // the device's FLOP/s; 0 when unknown
  Clock::time_point start;
  double tokens_done = 0;
};

// A resumed checkpoint, as the banner and the log tell it.
struct Trainer::Resumption {
  std::optional<std::string> from;   // its directory; none for a fresh run
  std::string changes, layout, lr;  // changes_line(); the layout that wrote it; resume_lr_cycle()'s note
};

}  // namespace mt
