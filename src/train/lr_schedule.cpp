#include "train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

#include "util/error.hpp"
#include "util/format.hpp"

namespace mt {

double learning_rate(const Config& cfg, const LrCycle& cycle, long long step) {
  const double peak = cfg.optimizer.lr;
  const auto& s = cfg.lr_schedule;
  const double min_lr = peak * s.min_lr_ratio;
  const long long k = step - cycle.start;
  // A second cycle warms up from where the first ended, not from zero.
  const double from = cycle.start > 0 && s.kind == LrScheduleKind::cosine ? min_lr : 0.0;
  if (k < s.warmup_steps) return from + (peak - from) * double(k + 1) / s.warmup_steps;
  if (s.kind == LrScheduleKind::constant) return peak;
  const long long decay_steps = cycle.end - cycle.start - s.warmup_steps;
  if (decay_steps <= 1) return peak;
  const double progress = std::min(1.0, double(k - s.warmup_steps) / double(decay_steps - 1));
  return min_lr + 0.5 * (peak - min_lr) * (1.0 + std::cos(M_PI * progress));
}

double learning_rate(const Config& cfg, long long step) { return learning_rate(cfg, {0, cfg.training.steps}, step); }

LrCycle resumed_lr_cycle(const Config& cfg, LrCycle saved, long long saved_steps, long long step,
                         const std::string& checkpoint) {
  if (saved.end == 0) saved = {0, saved_steps};
  const long long steps = cfg.training.steps;
  const bool decay_over = cfg.lr_schedule.kind == LrScheduleKind::cosine && step >= saved.end;
  if (!decay_over) return {saved.start, steps};
  if (steps <= step) return saved;  // nothing left to train
  const LrExtend extend = cfg.lr_schedule.extend;
  if (extend == LrExtend::constant) return saved;
  if (extend == LrExtend::rewarm) return {step, steps};
  const auto at = cfg.origin.find("training.steps");
  throw UserError(checkpoint + " ends the cosine decay of this run (steps " + std::to_string(saved.start) + " to " +
                  std::to_string(saved.end) + ", lr now " + format_number("%.2e", learning_rate(cfg, saved, step)) +
                  "), and training.steps = " + std::to_string(steps) +
                  (at != cfg.origin.end() ? " (" + at->second + ")" : std::string()) +
                  " adds steps after it: set lr_schedule.extend = \"constant\" to hold the final lr for them, or "
                  "\"rewarm\" to warm up again to optimizer.lr over lr_schedule.warmup_steps and decay a second "
                  "time to step " + std::to_string(steps));
}

}  // namespace mt
