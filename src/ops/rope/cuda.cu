// Rotary position embedding on the GPU, the same semantics as cpu.cpp: interleaved pairs of
// the rot_dim features from rot_offset in each head, pos = first_position + row % seq_len, in place or into a bfloat16
// copy. The angle and the rotation are math.hpp's, shared with the CPU.
#include <cuda_bf16.h>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/cuda_state.cuh"
#include "ops/backend/launch.cuh"
#include "ops/rope/math.hpp"
#include "util/error.hpp"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;

// One item per (row, pair): its cos and sin once, then the pair in every head of the row. Consecutive
// threads take consecutive pairs, so each head's accesses are contiguous across the warp.
__global__ void rope_kernel(float* x, int rows, int heads, int head_dim, int rot_offset, int rot_dim, int seq_len,
                            int first_position, float theta, RopeScaling scaling, bool inverse) {
  const int pairs = rot_dim / 2;
  const size_t n = size_t(rows) * pairs;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int r = int(i / pairs), pair = int(i % pairs);
    float c, s;
    rope_cos_sin(first_position + r % seq_len, pair, rot_dim, theta, scaling, inverse, &c, &s);
    float* row = x + size_t(r) * heads * head_dim + rot_offset + 2 * pair;
    for (int h = 0; h < heads; ++h) rope_rotate(row + size_t(h) * head_dim, c, s);
  }
}

// Feature i of the input: x's, or x_bf16's widened exactly.
__device__ float feature(const float* x, const __nv_bfloat16* x_bf16, size_t i) {
  return x_bf16 ? __bfloat162float(x_bf16[i]) : x[i];
}

// The rotation with a bfloat16 output: one item per output feature (x or x_bf16 is only read). A rotated
// feature computes its pair's rotation and keeps its own half; the others are copied, rounded.
__global__ void rope_bf16_kernel(const float* __restrict__ x, const __nv_bfloat16* __restrict__ x_bf16,
                                 __nv_bfloat16* __restrict__ out, int rows, int heads,
                                 int head_dim, int rot_offset, int rot_dim, int seq_len, int first_position,
                                 float theta, RopeScaling scaling, bool inverse) {
  const size_t n = size_t(rows) * heads * head_dim;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int f = int(i % head_dim) - rot_offset;
    float v = feature(x, x_bf16, i);
    if (f >= 0 && f < rot_dim / 2 * 2) {
      const int r = int(i / (size_t(heads) * head_dim)), odd = f & 1;
      float pair[2] = {feature(x, x_bf16, i - odd), feature(x, x_bf16, i - odd + 1)};
      float c, s;
      rope_cos_sin(first_position + r % seq_len, f / 2, rot_dim, theta, scaling, inverse, &c, &s);
      rope_rotate(pair, c, s);
      v = pair[odd];
    }
    out[i] = __float2bfloat16_rn(v);
  }
}

}  // namespace

void rope(DeviceState* s, const RopeArgs& a) {
  if (a.rows <= 0 || a.heads <= 0) return;
  activate(s);
  MT_CHECK(!a.x_bf16 || (a.out_bf16 && !a.x));
  if (a.out_bf16) {
    const size_t n = size_t(a.rows) * a.heads * a.head_dim;
    rope_bf16_kernel<<<stride_grid(s, n, kThreads), kThreads, 0, s->stream>>>(
        a.x, reinterpret_cast<const __nv_bfloat16*>(a.x_bf16), reinterpret_cast<__nv_bfloat16*>(a.out_bf16), a.rows,
        a.heads, a.head_dim, a.rot_offset, a.rot_dim, a.seq_len, a.first_position, a.theta, a.scaling, a.inverse);
    MT_CUDA_CHECK_LAUNCH();
    return;
  }
  if (a.rot_dim < 2) return;
  const size_t n = size_t(a.rows) * (a.rot_dim / 2);
  rope_kernel<<<stride_grid(s, n, kThreads), kThreads, 0, s->stream>>>(a.x, a.rows, a.heads, a.head_dim, a.rot_offset,
                                                                       a.rot_dim, a.seq_len, a.first_position, a.theta,
                                                                       a.scaling, a.inverse);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
