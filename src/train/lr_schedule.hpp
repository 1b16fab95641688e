#pragma once
#include "config/config.hpp"

namespace mt {
// Learning rate for optimizer step `step` (0-based): linear warmup from lr/warmup to lr over
// warmup_steps, then cosine (or constant) decay to min_lr_ratio * lr at the last step.
double learning_rate(const Config& cfg, int step);
}  // namespace mt
