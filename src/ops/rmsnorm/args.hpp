#pragma once
// Arguments of the RMSNorm ops (forward, input gradient, weight gradient).
#include "ops/bf16.hpp"
#include "ops/fp8/row_codes.hpp"

namespace mt {

// y = x * rstd * weight per row, rstd = 1/sqrt(mean(x^2) + eps). rstd is saved for backward.
// y_bf16 in place of y: y rounded to bfloat16 as it is written (the cast fused into the norm).
// residual: the residual add fused in front of the norm: the normed rows are x + residual, which
// are written to `sum` (which may be x itself) and read once.
// x_bf16 in place of x (with residual, sum another buffer): x stored in bfloat16 (a projection's
// bfloat16 output, precision.bf16_outputs), widened exactly; the sum and the norm are the fp32 ones.
// fp8 (codes set, with y): y's FP8 codes and scales as well, for the GEMMs that read y.
struct RmsNormForwardArgs {
  int rows = 0, dim = 0; float eps = 1e-6f;
  const float* x = nullptr; const float* weight = nullptr;
  float* y = nullptr; float* rstd = nullptr;
  Bf16* y_bf16 = nullptr;
  const float* residual = nullptr; float* sum = nullptr;
  Fp8RowCodes fp8 = {};
  const Bf16* x_bf16 = nullptr;
};
// dx = d(RMSNorm)/dx applied to dy (overwrites dx); plus residual_grad when set (the gradient
// that reaches the norm's input around it, added as it is written).
// fp8 (codes set): dx's FP8 codes and scales as well (the gradient format), for the Dgrad GEMMs
// that read dx: the residual stream's gradient entering the projections that write to it.
struct RmsNormBackwardInputArgs {
  int rows = 0, dim = 0;
  const float* dy = nullptr; const float* x = nullptr; const float* weight = nullptr;
  const float* rstd = nullptr; float* dx = nullptr;
  const float* residual_grad = nullptr;
  Fp8RowCodes fp8 = {};
};
// dweight += sum over rows of dy * x * rstd.
struct RmsNormBackwardWeightArgs {
  int rows = 0, dim = 0;
  const float* dy = nullptr; const float* x = nullptr; const float* rstd = nullptr;
  float* dweight = nullptr;
};

}  // namespace mt
