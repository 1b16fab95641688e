#include "train/adamw.hpp"

#include <cmath>

namespace mt {

double grad_norm(const ParamStore& p) {
  double ss = 0;
  for (float g : p.grads) ss += double(g) * g;
  return std::sqrt(ss);
}

void scale_grads(ParamStore& p, float factor) {
  for (float& g : p.grads) g *= factor;
}

void adamw_step(ParamStore& p, const OptimizerConfig& cfg, double lr, long t) {
  const double bc1 = 1.0 - std::pow(cfg.beta1, double(t)), bc2 = 1.0 - std::pow(cfg.beta2, double(t));
  const float b1 = float(cfg.beta1), b2 = float(cfg.beta2);
  for (const ParamInfo& info : p.infos) {
    const float decay = info.decay ? float(lr * cfg.weight_decay) : 0.0f;
    for (size_t i = info.offset; i < info.offset + info.numel; ++i) {
      const float g = p.grads[i];
      p.adam_m[i] = b1 * p.adam_m[i] + (1 - b1) * g;
      p.adam_v[i] = b2 * p.adam_v[i] + (1 - b2) * g * g;
      const double mhat = p.adam_m[i] / bc1, vhat = p.adam_v[i] / bc2;
      p.values[i] -= float(lr * mhat / (std::sqrt(vhat) + cfg.eps)) + decay * p.values[i];
    }
  }
}

}  // namespace mt
