// Reference optimizer ops: gradient scaling, the squared norm and AdamW (ops/optimizer/math.hpp).
#include "ops/optimizer/math.hpp"
#include "ops/backend/cpu_ops.hpp"

namespace mt::cpu {

void scale(DeviceState*, const ScaleArgs& a) {
  for (size_t i = 0; i < a.n; ++i) a.x[i] *= a.factor;
}

double sum_squares(DeviceState*, const SumSquaresArgs& a) {
  double ss = 0;
  for (size_t i = 0; i < a.n; ++i) ss += double(a.x[i]) * a.x[i];
  return ss;
}

void adamw(DeviceState*, const AdamwArgs& a) {
  for (size_t i = 0; i < a.n; ++i)
    adamw_element(a.grad[i], a.value[i], a.m[i], a.v[i], a.beta1, a.beta2, a.lr, a.bias_correction1,
                  a.bias_correction2, a.eps, a.decay);
}

}  // namespace mt::cpu
