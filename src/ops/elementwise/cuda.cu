// Elementwise ops on the GPU, the same semantics as cpu.cpp: SwiGLU forward (optionally with its
// product's FP8 codes, ops/fp8/row_codes.hpp, or from bfloat16 inputs) and backward (per-element
// math from math.hpp, shared with the CPU), add and copy_columns.
// Grid-stride loops over size_t indices, so any size fits the grid. No __restrict__: in-place calls
// (an output that is also an input) are as valid here as on the CPU.
#include <cuda_bf16.h>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/cuda_state.cuh"
#include "ops/backend/launch.cuh"
#include "ops/elementwise/math.hpp"
#include "ops/fp8/row_codes.cuh"
#include "util/error.hpp"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;

__device__ size_t first_index() { return size_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ size_t grid_stride() { return size_t(gridDim.x) * blockDim.x; }

// h_bf16 (when set, in place of h): the product rounded to bfloat16 as it is written; gate and up
// read from a.gate_bf16, a.up_bf16 where those are set.
__global__ void swiglu_forward_kernel(SwigluForwardArgs a, __nv_bfloat16* h_bf16) {
  const size_t n = a.n;
  float* h = a.h;
  for (size_t i = first_index(); i < n; i += grid_stride()) {
    const float v = swiglu(input_at(a.gate, a.gate_bf16, i), input_at(a.up, a.up_bf16, i));
    if (h_bf16) h_bf16[i] = __float2bfloat16_rn(v);
    else h[i] = v;
  }
}

// swiglu_forward_kernel over rows of `cols` values with h's FP8 codes (q): one warp per piece of a
// row, h's values written first; the warps of the padding rows write zero codes, and the last
// piece of every row the zero codes past its end.
__global__ void swiglu_forward_fp8_kernel(const float* gate, const float* up, float* h, int rows, int cols,
                                          Fp8RowCodes q) {
  const int pieces = fp8_row_pieces(cols, q.tile), lane = threadIdx.x & 31;
  const size_t units = size_t(q.rows_pad) * pieces, warps = grid_stride() >> 5;
  for (size_t w = first_index() >> 5; w < units; w += warps) {
    const int r = int(w / pieces), p = int(w % pieces);
    const size_t base = size_t(r) * cols;
    if (r < rows)
      fp8_code_piece_warp([&](int c) { return swiglu(gate[base + c], up[base + c]); }, h + base, r, p, cols, q);
    else
      fp8_zero_codes(q, r, p * q.tile, min(cols, (p + 1) * q.tile), lane, 32);
    if (p == pieces - 1) fp8_zero_codes(q, r, cols, q.ld, lane, 32);
  }
}

// swiglu_backward_kernel over rows of `cols` values with both gradients' FP8 codes (qg, qu), laid
// out as swiglu_forward_fp8_kernel's: each element's two gradients computed once, dup written on
// the way of dgate's piece, then read back for its own codes.
__global__ void swiglu_backward_fp8_kernel(const float* gate, const float* up, const float* dh, float* dgate,
                                           float* dup, int rows, int cols, Fp8RowCodes qg, Fp8RowCodes qu) {
  const int pieces = fp8_row_pieces(cols, qg.tile), lane = threadIdx.x & 31;
  const size_t units = size_t(qg.rows_pad) * pieces, warps = grid_stride() >> 5;
  for (size_t w = first_index() >> 5; w < units; w += warps) {
    const int r = int(w / pieces), p = int(w % pieces);
    const size_t base = size_t(r) * cols;
    if (r < rows) {
      const auto grads = [&](int c) {
        float dg, du;
        swiglu_grad(gate[base + c], up[base + c], dh[base + c], &dg, &du);
        dup[base + c] = du;
        return dg;
      };
      fp8_code_piece_warp(grads, dgate + base, r, p, cols, qg);
      fp8_code_piece_warp([&](int c) { return dup[base + c]; }, dup + base, r, p, cols, qu);
    } else {
      fp8_zero_codes(qg, r, p * qg.tile, min(cols, (p + 1) * qg.tile), lane, 32);
      fp8_zero_codes(qu, r, p * qu.tile, min(cols, (p + 1) * qu.tile), lane, 32);
    }
    if (p == pieces - 1) {
      fp8_zero_codes(qg, r, cols, qg.ld, lane, 32);
      fp8_zero_codes(qu, r, cols, qu.ld, lane, 32);
    }
  }
}

__global__ void swiglu_backward_kernel(SwigluBackwardArgs a) {
  for (size_t i = first_index(); i < a.n; i += grid_stride()) {
    float dg, du;
    swiglu_grad(input_at(a.gate, a.gate_bf16, i), input_at(a.up, a.up_bf16, i), input_at(a.dh, a.dh_bf16, i), &dg,
                &du);
    a.dgate[i] = dg;
    a.dup[i] = du;
  }
}

// y_bf16 (when set): y's addend read from there, widened exactly.
__global__ void add_kernel(size_t n, const float* x, float* y, const Bf16* y_bf16) {
  for (size_t i = first_index(); i < n; i += grid_stride()) y[i] = input_at(y, y_bf16, i) + x[i];
}

// One item per (group, row, column) of the windows, consecutive threads taking consecutive columns
// of a row; with dst_group 0 one per (row, column), summing the groups in order, so the result
// matches the CPU's group-by-group calls bit for bit.
__global__ void copy_columns_kernel(CopyColumnsArgs a, __nv_bfloat16* dst_bf16) {
  const bool summed = a.dst_group == 0 && a.groups > 1;
  const size_t per_group = size_t(a.rows) * a.cols, n = per_group * (summed ? 1 : a.groups);
  for (size_t i = first_index(); i < n; i += grid_stride()) {
    const size_t g = i / per_group, e = i % per_group, r = e / a.cols, c = e % a.cols;
    const float* src = a.src + g * a.src_group + r * a.src_stride + c;
    const size_t at = g * a.dst_group + r * a.dst_stride + c;
    if (dst_bf16) {
      dst_bf16[at] = __float2bfloat16_rn(*src);
      continue;
    }
    float v = a.accumulate ? a.dst[at] + *src : *src;
    if (summed)
      for (int h = 1; h < a.groups; ++h) v += src[size_t(h) * a.src_group];
    a.dst[at] = v;
  }
}

}  // namespace

void swiglu_forward(DeviceState* s, const SwigluForwardArgs& a) {
  if (a.n == 0) return;
  activate(s);
  if (a.fp8.codes) {
    MT_CHECK(a.h && !a.h_bf16 && !a.gate_bf16 && !a.up_bf16 && a.cols > 0 && a.n % size_t(a.cols) == 0);
    const int rows = int(a.n / size_t(a.cols));
    const size_t threads = size_t(a.fp8.rows_pad) * fp8_row_pieces(a.cols, a.fp8.tile) * 32;
    swiglu_forward_fp8_kernel<<<stride_grid(s, threads, kThreads), kThreads, 0, s->stream>>>(
        a.gate, a.up, a.h, rows, a.cols, a.fp8);
    MT_CUDA_CHECK_LAUNCH();
    return;
  }
  swiglu_forward_kernel<<<stride_grid(s, a.n, kThreads), kThreads, 0, s->stream>>>(
      a, reinterpret_cast<__nv_bfloat16*>(a.h_bf16));
  MT_CUDA_CHECK_LAUNCH();
}

void swiglu_backward(DeviceState* s, const SwigluBackwardArgs& a) {
  if (a.n == 0) return;
  activate(s);
  if (a.dgate_fp8.codes) {
    MT_CHECK(a.dup_fp8.codes && !a.gate_bf16 && !a.up_bf16 && !a.dh_bf16 && a.cols > 0 && a.n % size_t(a.cols) == 0 &&
             a.dup_fp8.tile == a.dgate_fp8.tile);
    const size_t threads = size_t(a.dgate_fp8.rows_pad) * fp8_row_pieces(a.cols, a.dgate_fp8.tile) * 32;
    swiglu_backward_fp8_kernel<<<stride_grid(s, threads, kThreads), kThreads, 0, s->stream>>>(
        a.gate, a.up, a.dh, a.dgate, a.dup, int(a.n / size_t(a.cols)), a.cols, a.dgate_fp8, a.dup_fp8);
    MT_CUDA_CHECK_LAUNCH();
    return;
  }
  swiglu_backward_kernel<<<stride_grid(s, a.n, kThreads), kThreads, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

void add(DeviceState* s, const AddArgs& a) {
  if (a.n == 0) return;
  activate(s);
  add_kernel<<<stride_grid(s, a.n, kThreads), kThreads, 0, s->stream>>>(a.n, a.x, a.y, a.y_bf16);
  MT_CUDA_CHECK_LAUNCH();
}

void copy_columns(DeviceState* s, const CopyColumnsArgs& a) {
  if (a.rows <= 0 || a.cols <= 0 || a.groups <= 0) return;
  activate(s);
  const size_t n = size_t(a.rows) * a.cols * (a.dst_group == 0 ? 1 : a.groups);
  copy_columns_kernel<<<stride_grid(s, n, kThreads), kThreads, 0, s->stream>>>(
      a, reinterpret_cast<__nv_bfloat16*>(a.dst_bf16));
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
