#pragma once
// AdamW's per-step coefficients (decoupled weight decay, bias-corrected moments); the update
// itself is the adamw op (ops/optimizer/math.hpp).
#include <cstddef>

#include "config/config.hpp"

namespace mt {

struct AdamwCoefficients {
  double lr = 0, bias_correction1 = 1, bias_correction2 = 1;
  float beta1 = 0.9f, beta2 = 0.95f;
  double eps = 1e-8;
  float decay = 0;  // lr * weight_decay where it applies, else 0
};

// Coefficients of step t (1-based); `decay` selects whether weight decay applies.
AdamwCoefficients adamw_coefficients(const OptimizerConfig& cfg, double lr, long t, bool decay);

}  // namespace mt
