#pragma once
// One element's AdamW update, shared by the CPU reference and the CUDA kernel.
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

}  // namespace mt
