// Reference optimizer ops: gradient clipping, the squared norm, the step's scalars and AdamW
// (ops/optimizer/math.hpp).
#include "ops/optimizer/math.hpp"
#include "ops/backend/cpu_ops.hpp"

namespace mt::cpu {

void scale(DeviceState*, const ScaleArgs& a) {
  const float factor = a.norm_sq ? clip_factor(*a.norm_sq, a.clip) : a.factor;
  if (a.norm_sq && factor == 0.0f) return;
  for (size_t i = 0; i < a.n; ++i) a.x[i] *= factor;
}

void sum_squares(DeviceState*, const SumSquaresArgs& a) {
  for (int r = 0; r < a.runs; ++r) {
    double ss = 0;
    for (size_t i = 0; i < a.n[r]; ++i) ss += double(a.x[r][i]) * a.x[r][i];
    *a.sum += ss;
  }
}

void sum_scalars(DeviceState*, const SumScalarsArgs& a) {
  for (size_t i = 0; i < a.n; ++i) *a.sum += a.scale * a.x[i];
}

void adamw(DeviceState*, const AdamwArgs& a) {
  if (!guard_passes(a.guard)) return;
  const AdamwStepValues& s = *a.step;
  const float decay = a.decay ? float(s.decay) : 0.0f;
  for (size_t i = 0; i < a.n; ++i)
    adamw_element(a.grad[i], a.value[i], a.m[i], a.v[i], a.beta1, a.beta2, s.lr, s.bias_correction1,
                  s.bias_correction2, a.eps, decay);
}

}  // namespace mt::cpu
