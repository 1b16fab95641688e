#pragma once
// The model's RoPE scaling (config's model.rope_scaling) in the terms the ops and attention take.
#include <cmath>

#include "config/config.hpp"
#include "ops/rope/math.hpp"

namespace mt {

// YaRN's magnitude m(x) = 0.1 x ln(factor) + 1 (1 without scaling).
inline double yarn_magnitude(const RopeScalingConfig& y, double x) {
  return y.kind == RopeScalingKind::yarn && y.factor > 1 ? 0.1 * x * std::log(y.factor) + 1.0 : 1.0;
}

inline RopeScaling rope_scaling_of(const ModelConfig& m) {
  const RopeScalingConfig& y = m.rope_scaling;
  if (y.kind != RopeScalingKind::yarn) return {};
  return {.factor = float(y.factor), .original_seq_len = y.original_seq_len, .beta_fast = float(y.beta_fast),
          .beta_slow = float(y.beta_slow),
          .magnitude = float(yarn_magnitude(y, y.mscale) / yarn_magnitude(y, y.mscale_all_dim))};
}

// The softmax scale of attention with `qk_dim` features per query: 1/sqrt(qk_dim), under YaRN
// times m(mscale_all_dim)^2.
inline float attention_scale(const ModelConfig& m, int qk_dim) {
  const double mag = yarn_magnitude(m.rope_scaling, m.rope_scaling.mscale_all_dim);
  if (mag == 1.0) return 1.0f / std::sqrt(float(qk_dim));
  return float(mag * mag / std::sqrt(double(qk_dim)));
}

}  // namespace mt
