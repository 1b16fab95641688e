#pragma once
// Arguments of the optimizer's ops and of the step's scalars. Included by ops/ops.hpp.
// The step's decisions (clip, skip) are read from device memory, so the host never waits for them.
#include <cstddef>

#include "ops/gemm/args.hpp"

namespace mt {

// x *= factor over n values. With norm_sq (device memory, the step's squared gradient norm) the
// factor is clip / sqrt(*norm_sq) instead, applied only when that norm is finite and above clip:
// gradient clipping decided on the device.
struct ScaleArgs {
  size_t n = 0; float factor = 1.0f; float* x = nullptr;
  const double* norm_sq = nullptr; double clip = 0;
};

// The sum of x^2 over several runs of floats, in double (the gradient norm): each run's sum from
// zero, then added to *sum in run order. x and n are device arrays of `runs` entries, made once;
// `total` (the elements of all runs) is for cost accounting only.
struct SumSquaresArgs {
  int runs = 0;
  const float* const* x = nullptr;
  const size_t* n = nullptr;
  double* sum = nullptr;
  size_t total = 0;
};

// *sum += scale * x[i] for i = 0 .. n-1 in order, on doubles in device memory: adds up the step's
// scalars on the device. scale 0 turns a value into a check: 0 where it is finite, NaN where not.
struct SumScalarsArgs { size_t n = 0; const double* x = nullptr; double scale = 1.0; double* sum = nullptr; };

// AdamW's coefficients that change from step to step, in device memory: a launch that reads them
// there has the same arguments every step, so a captured graph can replay it.
struct AdamwStepValues {
  double lr = 0, bias_correction1 = 1, bias_correction2 = 1;
  double decay = 0;  // float(lr * weight_decay), for the parameters that decay
};

// AdamW on n elements with decoupled weight decay and bias-corrected moments (ops/optimizer/math.hpp).
// `guard` (device memory, optional): guard[0] the step's squared gradient norm, guard[1] its loss check
// (SumScalarsArgs' scale 0); unless both are finite nothing changes (ops/optimizer/math.hpp).
struct AdamwArgs {
  size_t n = 0;
  const AdamwStepValues* step = nullptr;  // device memory
  bool decay = false;                     // whether step->decay applies
  double eps = 1e-8;
  float beta1 = 0.9f, beta2 = 0.95f;
  const float* grad = nullptr;
  float* value = nullptr; float* m = nullptr; float* v = nullptr;
  const double* guard = nullptr;
};

// Muon's learning rate of the step, in device memory like AdamwStepValues.
struct MuonStepValues {
  double lr = 0;
  double decay = 0;  // lr * Muon's weight decay
};

// Muon's momentum on n elements (torch.optim.Muon's order): buf += (1 - momentum) (grad - buf), then
// update = nesterov ? grad + momentum (buf - grad) : buf. Nothing changes unless `guard` passes (AdamwArgs).
struct MuonMomentumArgs {
  size_t n = 0;
  float momentum = 0.95f;
  bool nesterov = true;
  const float* grad = nullptr;
  float* buf = nullptr;
  float* update = nullptr;
  const double* guard = nullptr;
};

// Replaces each of `count` row-major [rows, cols] matrices at x (one after another) by its
// orthogonalisation: X = M / max(|M|_F, eps), transposed when rows > cols so that A = X X^T is the
// smaller Gram matrix, then `steps` times X <- a X + (b A + c A A) X (ops/optimizer/newton_schulz.hpp
// states the arithmetic). `work` holds newton_schulz_work(rows, cols) floats per matrix. `inputs`: the
// products' precision (bf16 rounds the factors of each product to bfloat16, fp32 accumulation).
struct NewtonSchulzArgs {
  int count = 1, rows = 0, cols = 0;
  float* x = nullptr;
  float* work = nullptr;
  int steps = 5;
  float a = 3.4445f, b = -4.7750f, c = 2.0315f;
  double eps = 1e-7;
  GemmPrecision inputs = GemmPrecision::fp32;
};

// value <- value - decay value - scale lr update on n elements, lr and decay from `step` (device memory),
// `scale` the matrix's update scale (optimizer.muon.scale). Unless `guard` passes nothing changes.
struct MuonApplyArgs {
  size_t n = 0;
  const MuonStepValues* step = nullptr;
  double scale = 1.0;
  const float* update = nullptr;
  float* value = nullptr;
  const double* guard = nullptr;
};

}  // namespace mt
