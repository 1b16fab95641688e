#pragma once
// Arguments of the optimizer's ops. Included by ops/ops.hpp.
#include <cstddef>

namespace mt {

// x *= factor over n values (gradient clipping).
struct ScaleArgs { size_t n = 0; float factor = 1.0f; float* x = nullptr; };
// The sum of x^2 over n values, accumulated in double (the gradient norm).
struct SumSquaresArgs { size_t n = 0; const float* x = nullptr; };

// AdamW on n elements with decoupled weight decay and bias-corrected moments (ops/optimizer/math.hpp).
struct AdamwArgs {
  size_t n = 0;
  double lr = 0, bias_correction1 = 1, bias_correction2 = 1, eps = 1e-8;
  float beta1 = 0.9f, beta2 = 0.95f;
  float decay = 0;  // lr * weight_decay where decay applies, else 0
  const float* grad = nullptr;
  float* value = nullptr; float* m = nullptr; float* v = nullptr;
};

}  // namespace mt
