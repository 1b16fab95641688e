// RMSNorm forward and backward on the GPU, the same formulas as cpu.cpp; the forward and the input
// gradient optionally write their output's FP8 codes too (ops/fp8/row_codes.hpp).
// Row reductions use one block per row with fp32 partial sums (the CPU sums in double; the
// difference is far below the parity tolerance). The weight gradient is reduced over rows in a
// fixed order without atomics, so it is bitwise reproducible run to run.
#include <cuda_bf16.h>

#include <algorithm>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/cuda_state.cuh"
#include "ops/backend/reduce.cuh"
#include "ops/fp8/row_codes.cuh"
#include "util/error.hpp"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;  // per block; a multiple of 32, at most 32 warps
// Rows summed by one block of the weight-gradient kernel. It depends on nothing but this constant,
// so the summation order (and the result) is the same on every GPU model.
constexpr int kRowsPerChunk = 64;
constexpr int kMaxGridY = 65535;

// y_bf16 (when set, in place of y): the output rounded to bfloat16 as it is written.
// residual (when set): the row normed is x + residual, written to sum (which may alias x: each
// thread reads and writes only its own elements, and reads its sum back in the second loop).
// x_bf16 (when set, with residual): x read from there, widened exactly.
// The rstd of the row at base (every thread of the block calling), with residual: after writing
// x + residual to sum.
__device__ float row_rstd(const float* x, const __nv_bfloat16* x_bf16, const float* __restrict__ residual, float* sum,
                          size_t base, int dim, float eps) {
  float ss = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = x_bf16 ? __bfloat162float(x_bf16[base + i]) : x[base + i];
    if (residual) sum[base + i] = v = v + residual[base + i];
    ss += v * v;
  }
  ss = block_reduce(ss, SumOp{}, 0.0f);
  return 1.0f / sqrtf(ss / float(dim) + eps);
}

__global__ void forward_kernel(const float* x, const __nv_bfloat16* x_bf16, const float* __restrict__ residual,
                               float* sum, const float* __restrict__ weight, float* __restrict__ y,
                               __nv_bfloat16* __restrict__ y_bf16, float* __restrict__ rstd, int dim, float eps) {
  const size_t base = size_t(blockIdx.x) * dim;
  const float r = row_rstd(x, x_bf16, residual, sum, base, dim, eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
  const float* normed = residual ? sum : x;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = normed[base + i] * r * weight[i];
    if (y_bf16) y_bf16[base + i] = __float2bfloat16_rn(v);
    else y[base + i] = v;
  }
}

// forward_kernel with y's FP8 codes (q): each warp writes whole pieces of the row, values first, so
// y and rstd are forward_kernel's bits and the codes the quantizer's. Blocks past the rows write
// the zero codes of the padding rows.
__global__ void forward_fp8_kernel(const float* x, const __nv_bfloat16* x_bf16, const float* __restrict__ residual,
                                   float* sum,
                                   const float* __restrict__ weight, float* __restrict__ y, float* __restrict__ rstd,
                                   int rows, int dim, float eps, Fp8RowCodes q) {
  const int row = blockIdx.x;
  if (row >= rows) return fp8_zero_codes(q, row, 0, q.ld, threadIdx.x, blockDim.x);
  const size_t base = size_t(row) * dim;
  const float r = row_rstd(x, x_bf16, residual, sum, base, dim, eps);
  __syncthreads();  // the sums written in row_rstd are read by other threads below
  if (threadIdx.x == 0) rstd[row] = r;
  const float* normed = (residual ? sum : x) + base;
  const int warps = blockDim.x >> 5, pieces = fp8_row_pieces(dim, q.tile);
  for (int p = threadIdx.x >> 5; p < pieces; p += warps)
    fp8_code_piece_warp([&](int c) { return normed[c] * r * weight[c]; }, y + base, row, p, dim, q);
  fp8_zero_codes(q, row, dim, q.ld, threadIdx.x, blockDim.x);
}

// dx_i = r (w_i dy_i - x_i r^2 mean_j(w_j dy_j x_j)) [+ residual_grad_i]
__global__ void backward_input_kernel(const float* __restrict__ dy, const float* __restrict__ x,
                                      const float* __restrict__ weight, const float* __restrict__ rstd,
                                      const float* __restrict__ residual_grad, float* __restrict__ dx, int dim) {
  const size_t base = size_t(blockIdx.x) * dim;
  float dot = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dot += weight[i] * dy[base + i] * x[base + i];
  dot = block_reduce(dot, SumOp{}, 0.0f);
  const float r = rstd[blockIdx.x];
  const float c = dot / float(dim) * r * r;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float g = r * (weight[i] * dy[base + i] - x[base + i] * c);
    if (residual_grad) g += residual_grad[base + i];
    dx[base + i] = g;
  }
}

// backward_input_kernel with dx's FP8 codes (q): the dot of the row as there, then each warp
// writes whole pieces of dx, values first (backward_input_kernel's bits), then their codes. Blocks
// past the rows write the zero codes of the padding rows.
__global__ void backward_input_fp8_kernel(const float* __restrict__ dy, const float* __restrict__ x,
                                          const float* __restrict__ weight, const float* __restrict__ rstd,
                                          const float* __restrict__ residual_grad, float* __restrict__ dx, int rows,
                                          int dim, Fp8RowCodes q) {
  const int row = blockIdx.x;
  if (row >= rows) return fp8_zero_codes(q, row, 0, q.ld, threadIdx.x, blockDim.x);
  const size_t base = size_t(row) * dim;
  float dot = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dot += weight[i] * dy[base + i] * x[base + i];
  dot = block_reduce(dot, SumOp{}, 0.0f);
  const float r = rstd[row];
  const float c = dot / float(dim) * r * r;
  const auto grad = [&](int i) {
    float g = r * (weight[i] * dy[base + i] - x[base + i] * c);
    if (residual_grad) g += residual_grad[base + i];
    return g;
  };
  const int warps = blockDim.x >> 5, pieces = fp8_row_pieces(dim, q.tile);
  for (int p = threadIdx.x >> 5; p < pieces; p += warps) fp8_code_piece_warp(grad, dx + base, row, p, dim, q);
  fp8_zero_codes(q, row, dim, q.ld, threadIdx.x, blockDim.x);
}

// One thread per column sums its column over one chunk of rows (coalesced across the warp); blockIdx.x is
// the chunk, so any row count fits the grid, and columns beyond grid.y blocks loop.
// With a single chunk it accumulates straight into dweight; otherwise it writes its partial sum.
__global__ void backward_weight_partial_kernel(const float* __restrict__ dy, const float* __restrict__ x,
                                               const float* __restrict__ rstd, float* __restrict__ out, int rows,
                                               int dim, bool accumulate) {
  const int r0 = blockIdx.x * kRowsPerChunk;
  const int r1 = min(rows, r0 + kRowsPerChunk);
  for (int col = blockIdx.y * blockDim.x + threadIdx.x; col < dim; col += gridDim.y * blockDim.x) {
    float acc = 0.0f;
    for (int r = r0; r < r1; ++r) acc += dy[size_t(r) * dim + col] * x[size_t(r) * dim + col] * rstd[r];
    if (accumulate)
      out[col] += acc;
    else
      out[size_t(blockIdx.x) * dim + col] = acc;
  }
}

// Adds the chunk partials of each column to dweight, chunks in order.
__global__ void backward_weight_finish_kernel(const float* __restrict__ partial, float* __restrict__ dweight,
                                              int chunks, int dim) {
  for (int col = blockIdx.x * blockDim.x + threadIdx.x; col < dim; col += gridDim.x * blockDim.x) {
    float acc = 0.0f;
    for (int c = 0; c < chunks; ++c) acc += partial[size_t(c) * dim + col];
    dweight[col] += acc;
  }
}

}  // namespace

void rmsnorm_forward(DeviceState* s, const RmsNormForwardArgs& a) {
  if (a.rows == 0 || a.dim == 0) return;
  activate(s);
  MT_CHECK(!a.x_bf16 || (a.residual && !a.x));
  const auto* x_bf16 = reinterpret_cast<const __nv_bfloat16*>(a.x_bf16);
  if (a.fp8.codes) {
    MT_CHECK(a.y && !a.y_bf16 && a.fp8.rows_pad >= a.rows);
    forward_fp8_kernel<<<a.fp8.rows_pad, kThreads, 0, s->stream>>>(a.x, x_bf16, a.residual, a.sum, a.weight, a.y,
                                                                   a.rstd, a.rows, a.dim, a.eps, a.fp8);
    MT_CUDA_CHECK_LAUNCH();
    return;
  }
  forward_kernel<<<a.rows, kThreads, 0, s->stream>>>(a.x, x_bf16, a.residual, a.sum, a.weight, a.y,
                                                     reinterpret_cast<__nv_bfloat16*>(a.y_bf16), a.rstd, a.dim, a.eps);
  MT_CUDA_CHECK_LAUNCH();
}

void rmsnorm_backward_input(DeviceState* s, const RmsNormBackwardInputArgs& a) {
  if (a.rows == 0 || a.dim == 0) return;
  activate(s);
  if (a.fp8.codes) {
    MT_CHECK(a.fp8.rows_pad >= a.rows);
    backward_input_fp8_kernel<<<a.fp8.rows_pad, kThreads, 0, s->stream>>>(a.dy, a.x, a.weight, a.rstd,
                                                                           a.residual_grad, a.dx, a.rows, a.dim, a.fp8);
    MT_CUDA_CHECK_LAUNCH();
    return;
  }
  backward_input_kernel<<<a.rows, kThreads, 0, s->stream>>>(a.dy, a.x, a.weight, a.rstd, a.residual_grad, a.dx,
                                                            a.dim);
  MT_CUDA_CHECK_LAUNCH();
}

void rmsnorm_backward_weight(DeviceState* s, const RmsNormBackwardWeightArgs& a) {
  if (a.rows == 0 || a.dim == 0) return;
  activate(s);
  const int chunks = (a.rows + kRowsPerChunk - 1) / kRowsPerChunk;
  const int col_blocks = std::min((a.dim + kThreads - 1) / kThreads, kMaxGridY);
  const dim3 grid(chunks, col_blocks);
  if (chunks == 1) {
    backward_weight_partial_kernel<<<grid, kThreads, 0, s->stream>>>(a.dy, a.x, a.rstd, a.dweight, a.rows, a.dim, true);
    MT_CUDA_CHECK_LAUNCH();
    return;
  }
  auto* partial = static_cast<float*>(scratch(s, kScratchReduce, size_t(chunks) * a.dim * sizeof(float)));
  backward_weight_partial_kernel<<<grid, kThreads, 0, s->stream>>>(a.dy, a.x, a.rstd, partial, a.rows, a.dim, false);
  MT_CUDA_CHECK_LAUNCH();
  backward_weight_finish_kernel<<<col_blocks, kThreads, 0, s->stream>>>(partial, a.dweight, chunks, a.dim);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
