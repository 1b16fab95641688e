#include <cmath>

#include "ops/bf16.hpp"
#include "ops/backend/cpu_ops.hpp"
#include "util/error.hpp"

namespace mt::cpu {

void rmsnorm_forward(DeviceState*, const RmsNormForwardArgs& a) {
  MT_CHECK(!a.x_bf16 || (a.residual && !a.x));
  for (int r = 0; r < a.rows; ++r) {
    const size_t row = size_t(r) * a.dim;
    const float* x = a.x ? a.x + row : nullptr;
    if (a.residual) {
      for (int i = 0; i < a.dim; ++i) {
        const float v = a.x_bf16 ? bf16_bits_to_float(a.x_bf16[row + i].bits) : x[i];
        a.sum[row + i] = v + a.residual[row + i];
      }
      x = a.sum + row;
    }
    double ss = 0;
    for (int i = 0; i < a.dim; ++i) ss += double(x[i]) * x[i];
    float rstd = float(1.0 / std::sqrt(ss / a.dim + a.eps));
    a.rstd[r] = rstd;
    for (int i = 0; i < a.dim; ++i) {
      const float y = x[i] * rstd * a.weight[i];
      if (a.y_bf16) a.y_bf16[row + i].bits = float_to_bf16_bits(y);
      else a.y[row + i] = y;
    }
    if (a.fp8.codes) fp8_code_row(a.y + row, r, a.dim, a.fp8);
  }
  if (a.fp8.codes) fp8_zero_padding_rows(a.rows, a.fp8);
}

// y_i = w_i x_i r, r = (mean x^2 + eps)^-1/2  =>  dx_i = r (w_i dy_i - x_i r^2 mean_j(w_j dy_j x_j)).
void rmsnorm_backward_input(DeviceState*, const RmsNormBackwardInputArgs& a) {
  for (int r = 0; r < a.rows; ++r) {
    const float* x = a.x + size_t(r) * a.dim;
    const float* dy = a.dy + size_t(r) * a.dim;
    float* dx = a.dx + size_t(r) * a.dim;
    const float rstd = a.rstd[r];
    double dot = 0;
    for (int i = 0; i < a.dim; ++i) dot += double(a.weight[i]) * dy[i] * x[i];
    const float c = float(dot / a.dim) * rstd * rstd;
    for (int i = 0; i < a.dim; ++i) dx[i] = rstd * (a.weight[i] * dy[i] - x[i] * c);
    if (a.residual_grad)
      for (int i = 0; i < a.dim; ++i) dx[i] += a.residual_grad[size_t(r) * a.dim + i];
  }
  if (a.fp8.codes) fp8_code_rows(a.dx, a.rows, a.dim, a.fp8);
}

void rmsnorm_backward_weight(DeviceState*, const RmsNormBackwardWeightArgs& a) {
  for (int r = 0; r < a.rows; ++r) {
    const float* x = a.x + size_t(r) * a.dim;
    const float* dy = a.dy + size_t(r) * a.dim;
    const float rstd = a.rstd[r];
    for (int i = 0; i < a.dim; ++i) a.dweight[i] += dy[i] * x[i] * rstd;
  }
}

}  // namespace mt::cpu
