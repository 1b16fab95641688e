#include "train/adamw.hpp"

#include <cmath>

namespace mt {

AdamwCoefficients adamw_coefficients(const OptimizerConfig& cfg, double lr, long t, bool decay) {
  return {.lr = lr, .bias_correction1 = 1.0 - std::pow(cfg.beta1, double(t)),
          .bias_correction2 = 1.0 - std::pow(cfg.beta2, double(t)), .beta1 = float(cfg.beta1),
          .beta2 = float(cfg.beta2), .eps = cfg.eps, .decay = decay ? float(lr * cfg.weight_decay) : 0.0f};
}

void adamw_update(const AdamwCoefficients& c, size_t n, const float* grad, float* value, float* m, float* v) {
  const float b1 = c.beta1, b2 = c.beta2;
  for (size_t i = 0; i < n; ++i) {
    const float g = grad[i];
    m[i] = b1 * m[i] + (1 - b1) * g;
    v[i] = b2 * v[i] + (1 - b2) * g * g;
    const double mhat = m[i] / c.bias_correction1, vhat = v[i] / c.bias_correction2;
    value[i] -= float(c.lr * mhat / (std::sqrt(vhat) + c.eps)) + c.decay * value[i];
  }
}

}  // namespace mt
