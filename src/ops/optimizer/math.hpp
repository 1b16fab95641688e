#pragma once
// One element's AdamW update and the step's guard, shared by the CPU reference and the CUDA kernels.
#include <cmath>

#include "ops/host_device.hpp"

namespace mt {

MT_HD inline void adamw_element(float g, float& value, float& m, float& v, float beta1, float beta2, double lr,
                                double bias_correction1, double bias_correction2, double eps, float decay) {
  m = beta1 * m + (1 - beta1) * g;
  v = beta2 * v + (1 - beta2) * g * g;
  const double mhat = m / bias_correction1, vhat = v / bias_correction2;
  value -= float(lr * mhat / (sqrt(vhat) + eps)) + decay * value;
}

// x - x is 0 for every finite x and NaN for an infinity or NaN: the same test on the host and the device.
MT_HD inline bool finite(double x) { return x - x == 0.0; }

// Whether a step's update goes ahead (AdamwArgs::guard): its squared gradient norm and its loss check
// are finite; no guard: always.
MT_HD inline bool guard_passes(const double* guard) {
  return guard == nullptr || (finite(guard[0]) && finite(guard[1]));
}

// The clipping factor from the step's squared gradient norm, or 0 when no clipping applies (the
// norm is not finite, or at most clip).
MT_HD inline float clip_factor(double norm_sq, double clip) {
  const double norm = sqrt(norm_sq);
  if (!finite(norm) || !(clip > 0 && norm > clip)) return 0.0f;
  return float(clip / norm);
}

}  // namespace mt
