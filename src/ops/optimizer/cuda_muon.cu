// Muon's ops on the GPU: the momentum and the update through the element rules the CPU reference
// uses (ops/optimizer/newton_schulz.hpp), and the Newton-Schulz iteration as the backend's own batched
// GEMMs (every matrix of a call in one product each; bf16 inputs when NewtonSchulzArgs::inputs says so)
// around a normalising kernel, one block per matrix. The GEMMs sum in cuBLAS's order, not the CPU's.
#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/launch.cuh"
#include "ops/backend/reduce.cuh"
#include "ops/optimizer/math.hpp"
#include "ops/optimizer/newton_schulz.hpp"

namespace mt::cuda {

namespace {

__global__ void muon_momentum_kernel(MuonMomentumArgs a) {
  if (!guard_passes(a.guard)) return;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += size_t(gridDim.x) * blockDim.x)
    muon_momentum_element(a.grad[i], a.buf[i], a.update[i], a.momentum, a.nesterov);
}

__global__ void muon_apply_kernel(MuonApplyArgs a) {
  if (!guard_passes(a.guard)) return;
  const float lr_scaled = float(a.step->lr * a.scale), decay = float(a.step->decay);
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += size_t(gridDim.x) * blockDim.x)
    muon_apply_element(a.update[i], a.value[i], lr_scaled, decay);
}

// Block m: matrix m of [rows, cols] at from + m * from_step into [rows, cols] (or [cols, rows] when
// `transpose`) at to + m * to_step.
__global__ void place_kernel(const float* from, size_t from_step, float* to, size_t to_step, int rows, int cols,
                             bool transpose) {
  const float* in = from + blockIdx.x * from_step;
  float* out = to + blockIdx.x * to_step;
  const size_t n = size_t(rows) * cols;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
    const size_t r = i / cols, c = i % cols;
    out[transpose ? c * rows + r : i] = in[i];
  }
}

// Block m: matrix m (n values at x + m * step) divided by max(its Frobenius norm, eps).
__global__ void normalise_kernel(float* x, size_t step, size_t n, double eps) {
  float* v = x + blockIdx.x * step;
  double ss = 0;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) ss += double(v[i]) * v[i];
  ss = block_reduce(ss, SumOp{}, 0.0);
  const double norm = sqrt(ss);
  const float inv = float(1.0 / (norm > eps ? norm : eps));
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) v[i] *= inv;
}

// One batched product over the call's matrices, each operand at its offset in the matrix's work.
GemmArgs batched(const NewtonSchulzArgs& a, long long work, int m, int n, int k) {
  GemmArgs g;
  g.m = m, g.n = n, g.k = k;
  g.inputs = a.inputs;
  g.batch = a.count;
  g.batch_a = g.batch_b = g.batch_c = work;
  return g;
}

}  // namespace

void muon_momentum(DeviceState* s, const MuonMomentumArgs& a) {
  if (a.n == 0) return;
  activate(s);
  muon_momentum_kernel<<<stride_grid(s, a.n, kBlock), kBlock, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

void muon_apply(DeviceState* s, const MuonApplyArgs& a) {
  if (a.n == 0) return;
  activate(s);
  muon_apply_kernel<<<stride_grid(s, a.n, kBlock), kBlock, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

void newton_schulz(DeviceState* s, const NewtonSchulzArgs& a) {
  if (a.count == 0 || a.rows == 0 || a.cols == 0) return;
  activate(s);
  const bool tall = a.rows > a.cols;
  const int sm = tall ? a.cols : a.rows, l = tall ? a.rows : a.cols;
  const size_t each = size_t(a.rows) * a.cols, sl = size_t(sm) * l, ss = size_t(sm) * sm;
  const long long work = (long long)newton_schulz_work(a.rows, a.cols);
  float *x = a.work, *y = a.work + sl, *gram = a.work + 2 * sl, *poly = gram + ss;
  place_kernel<<<a.count, kBlock, 0, s->stream>>>(a.x, each, x, size_t(work), a.rows, a.cols, tall);
  MT_CUDA_CHECK_LAUNCH();
  normalise_kernel<<<a.count, kBlock, 0, s->stream>>>(x, size_t(work), sl, a.eps);
  MT_CUDA_CHECK_LAUNCH();
  for (int step = 0; step < a.steps; ++step) {
    GemmArgs g = batched(a, work, sm, sm, l);  // A = X X^T
    g.a = x, g.b = x, g.trans_b = true, g.c = gram;
    gemm(s, g);
    place_kernel<<<a.count, kBlock, 0, s->stream>>>(gram, size_t(work), poly, size_t(work), sm, sm, false);
    MT_CUDA_CHECK_LAUNCH();
    g = batched(a, work, sm, sm, sm);  // B = b A + c A A
    g.a = gram, g.b = gram, g.c = poly, g.alpha = a.c, g.beta = a.b;
    gemm(s, g);
    place_kernel<<<a.count, kBlock, 0, s->stream>>>(x, size_t(work), y, size_t(work), sm, l, false);
    MT_CUDA_CHECK_LAUNCH();
    g = batched(a, work, sm, l, sm);  // X' = a X + B X, into y; then y is X
    g.a = poly, g.b = x, g.c = y, g.beta = a.a;
    gemm(s, g);
    float* t = x;
    x = y, y = t;
  }
  place_kernel<<<a.count, kBlock, 0, s->stream>>>(x, size_t(work), a.x, each, sm, l, tall);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
