#include "train/adamw.hpp"

#include <cmath>

namespace mt {

AdamwCoefficients adamw_coefficients(const OptimizerConfig& cfg, double lr, long t, bool decay) {
  return {.lr = lr, .bias_correction1 = 1.0 - std::pow(cfg.beta1, double(t)),
          .bias_correction2 = 1.0 - std::pow(cfg.beta2, double(t)), .beta1 = float(cfg.beta1),
          .beta2 = float(cfg.beta2), .eps = cfg.eps, .decay = decay ? float(lr * cfg.weight_decay) : 0.0f};
}

}  // namespace mt
