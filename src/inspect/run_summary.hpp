#pragma once
// One run distilled for `inspect`: progress, losses, speed, expert balance, checkpoints and
// whether it is still being written. Read from <run>/log.h5 and <run>/ckpt/.
#include <map>
#include <string>
#include <vector>

#include "inspect/checkpoint_summary.hpp"
#include "inspect/flat_config.hpp"
#include "inspect/run_stats.hpp"

namespace mt {

struct RunSummary {
  std::string dir, name;  // name: run.name
  FlatConfig config;
  std::map<std::string, double> numbers;     // log attributes: total_params, active_params, ...
  std::map<std::string, std::string> texts;  // log attributes: device, layout
  std::string writer;                        // run_writer(): empty when nothing writes the run
  bool killed = false;                       // no writer, but log.h5 was left open: its trainer was killed
  long long steps_done = 0, steps_total = 0, tokens_per_step = 0;
  size_t rows = 0;        // logged steps (a resumed run logs each step once)
  size_t window = 0;      // steps the smoothed losses average over
  double loss_last = 0, loss_smoothed = 0;
  double loss_best = 0;  // the lowest single step
  long long loss_best_step = 0;
  double loss_best_smoothed = 0;
  long long best_first_step = 0, best_last_step = 0;  // the steps of that window
  bool has_eval = false;
  double val_last = 0, val_best = 0;
  long long val_last_step = 0, val_best_step = 0;
  double tokens_per_s = 0, mfu = 0;  // medians after the first logged step; mfu NaN without a known peak
  std::vector<Imbalance> imbalance;  // per MoE layer
  CheckpointList checkpoints;

  // "running", "complete" or "stopped"
  std::string status() const;
  // "complete", "stopped at step 120 of 300", "running (<why>), at step 12 of 300"
  std::string status_text() const;
};

// UserError naming the file when log.h5 is missing or unreadable. window: steps to smooth over (>= 1).
RunSummary summarize_run(const std::string& dir, size_t window);

}  // namespace mt
