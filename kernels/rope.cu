// Rotary position embedding on the GPU, the same semantics as src/ops/cpu/rope.cpp: interleaved pairs of
// the rot_dim features from rot_offset in each head, pos = row % seq_len, in place. The angle and the
// rotation are src/ops/op_math.hpp's, shared with the CPU.
#include "cuda_check.cuh"
#include "cuda_ops.hpp"
#include "cuda_state.cuh"
#include "launch.cuh"
#include "ops/op_math.hpp"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;

// One item per (row, pair): its cos and sin once, then the pair in every head of the row. Consecutive
// threads take consecutive pairs, so each head's accesses are contiguous across the warp.
__global__ void rope_kernel(float* x, int rows, int heads, int head_dim, int rot_offset, int rot_dim, int seq_len,
                            float theta, bool inverse) {
  const int pairs = rot_dim / 2;
  const size_t n = size_t(rows) * pairs;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int r = int(i / pairs), pair = int(i % pairs);
    float c, s;
    rope_cos_sin(r % seq_len, pair, rot_dim, theta, inverse, &c, &s);
    float* row = x + size_t(r) * heads * head_dim + rot_offset + 2 * pair;
    for (int h = 0; h < heads; ++h) rope_rotate(row + size_t(h) * head_dim, c, s);
  }
}

}  // namespace

void rope(DeviceState* s, const RopeArgs& a) {
  if (a.rows <= 0 || a.heads <= 0 || a.rot_dim < 2) return;
  activate(s);
  const size_t n = size_t(a.rows) * (a.rot_dim / 2);
  rope_kernel<<<stride_grid(s, n, kThreads), kThreads, 0, s->stream>>>(a.x, a.rows, a.heads, a.head_dim, a.rot_offset,
                                                                       a.rot_dim, a.seq_len, a.theta, a.inverse);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
