#include "train/adamw.hpp"

#include <cmath>

namespace mt {

AdamwStepValues adamw_step_values(const OptimizerConfig& cfg, double lr, long t) {
  return {.lr = lr, .bias_correction1 = 1.0 - std::pow(cfg.beta1, double(t)),
          .bias_correction2 = 1.0 - std::pow(cfg.beta2, double(t)), .decay = float(lr * cfg.weight_decay)};
}

}  // namespace mt
