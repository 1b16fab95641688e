#include "inspect/run_summary.hpp"

#include <algorithm>
#include <cmath>

#include "inspect/run_data.hpp"
#include "inspect/writer_state.hpp"

namespace mt {

std::string RunSummary::status() const {
  if (!writer.empty()) return "running";
  return steps_done >= steps_total ? "complete" : "stopped";
}

std::string RunSummary::status_text() const {
  const std::string of = "step " + std::to_string(steps_done) + " of " + std::to_string(steps_total);
  if (!writer.empty()) return "running (" + writer + "), at " + of;
  if (steps_done >= steps_total) return "complete";
  return "stopped at " + of + (killed ? " (its trainer was killed: log.h5 was left open)" : "");
}

RunSummary summarize_run(const std::string& dir, size_t window) {
  // Look for a writer first: a run that finishes while being read is then reported as running,
  // with the steps read, rather than as stopped short.
  RunSummary s;
  s.writer = run_writer(dir);
  s.killed = s.writer.empty() && log_left_open(dir);
  const RunData run = load_run(dir);
  s.dir = dir;
  s.config = flatten_config(run.config_toml, dir + "/log.h5 (attribute config_toml)");
  s.name = config_text(s.config, "run.name", "");
  s.numbers = run.numbers;
  s.texts = run.texts;
  s.steps_total = config_int(s.config, "training.steps", 0);
  s.tokens_per_step = config_int(s.config, "training.global_batch", 0) * config_int(s.config, "model.seq_len", 0);
  s.rows = run.steps.size();
  s.steps_done = run.steps.empty() ? 0 : run.steps.back();

  const std::vector<double>& loss = run.scalar("loss");
  s.window = std::min(window, loss.size());
  s.loss_last = loss.empty() ? NAN : loss.back();
  s.loss_smoothed = tail_mean(loss, window);
  const WindowMean best = best_window_mean(loss, window);
  s.loss_best_smoothed = best.mean;
  s.loss_best = NAN;
  if (!loss.empty()) {
    const size_t i = size_t(std::min_element(loss.begin(), loss.end()) - loss.begin());
    s.loss_best = loss[i];
    s.loss_best_step = run.steps[i];
    s.best_last_step = run.steps[best.last];
    s.best_first_step = run.steps[best.last + 1 - s.window];
  }
  s.has_eval = !run.eval_loss.empty();
  if (s.has_eval) {
    s.val_last = run.eval_loss.back();
    s.val_last_step = run.eval_steps.back();
    const size_t i = size_t(std::min_element(run.eval_loss.begin(), run.eval_loss.end()) - run.eval_loss.begin());
    s.val_best = run.eval_loss[i];
    s.val_best_step = run.eval_steps[i];
  }
  s.tokens_per_s = median_after_first(run.scalar("tokens_per_s"));
  s.mfu = median_after_first(run.scalar("mfu"));
  s.imbalance = expert_imbalance(run.expert_load, s.rows, run.moe_layers, run.experts);
  s.checkpoints = list_checkpoints(dir);
  return s;
}

}  // namespace mt
