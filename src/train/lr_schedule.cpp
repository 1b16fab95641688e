#include "train/lr_schedule.hpp"

#include <cmath>

namespace mt {

double learning_rate(const Config& cfg, int step) {
  const double peak = cfg.optimizer.lr;
  const auto& s = cfg.lr_schedule;
  if (step < s.warmup_steps) return peak * (step + 1) / s.warmup_steps;
  if (s.kind == "constant") return peak;
  const int decay_steps = cfg.training.steps - s.warmup_steps;
  if (decay_steps <= 1) return peak;
  const double progress = double(step - s.warmup_steps) / (decay_steps - 1);
  const double min_lr = peak * s.min_lr_ratio;
  return min_lr + 0.5 * (peak - min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace mt
