#pragma once
// What every layer needs to run: the device, the GEMM input precision and the parameter store.
// Linear maps follow the PyTorch convention: W is [out, in] and y = x W^T.
#include "model/params.hpp"
#include "ops/ops.hpp"
#include "tensor/arena.hpp"

namespace mt {

struct LayerEnv {
  const Backend* backend = nullptr;
  GemmInputs gemm_inputs = GemmInputs::fp32;
  ParamStore* params = nullptr;

  const Backend& be() const { return *backend; }

  // y[rows,out] = x[rows,in] W^T  (accumulate: y += ...)
  void linear_forward(const float* x, const float* w, int rows, int in, int out, float* y,
                      bool accumulate = false) const {
    backend->gemm({.m = rows, .n = out, .k = in, .a = x, .b = w, .trans_b = true, .c = y,
                   .beta = accumulate ? 1.0f : 0.0f, .inputs = gemm_inputs});
  }
  // dx[rows,in] = dy[rows,out] W  (accumulate: dx += ...)
  void linear_backward_input(const float* dy, const float* w, int rows, int in, int out, float* dx,
                             bool accumulate = false) const {
    backend->gemm({.m = rows, .n = in, .k = out, .a = dy, .b = w, .c = dx,
                   .beta = accumulate ? 1.0f : 0.0f, .inputs = gemm_inputs});
  }
  // dW[out,in] += dy[rows,out]^T x[rows,in]
  void linear_backward_weight(const float* dy, const float* x, int rows, int in, int out, float* dw) const {
    backend->gemm({.m = out, .n = in, .k = rows, .a = dy, .trans_a = true, .b = x, .c = dw,
                   .beta = 1.0f, .inputs = gemm_inputs});
  }
};

}  // namespace mt
