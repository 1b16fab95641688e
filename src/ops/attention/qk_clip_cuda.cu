// QK-Clip on the GPU: each head's largest attention logit (AttentionForwardArgs::max_logit) as a pass of
// its own after the forward, whichever kernel ran it (cuDNN's SDPA graph gives the log-sum-exp of a row,
// not its maximum; the own kernels' running maximum is reset per tile of keys), and the rescaling of a
// projection's rows (QkClipRowsArgs). The pass repeats q . k on CUDA cores, one block per query row; it
// runs only with optimizer.qk_clip on (docs/optimizer.md).
#include <cuda_bf16.h>

#include <climits>

#include "ops/attention/cuda.cuh"
#include "ops/backend/cuda_ops.hpp"

namespace mt::cuda {

namespace {

constexpr int kThreads = 128;

// *p = max(*p, v); NaN leaves *p as it is, as std::max(*p, v) does.
__device__ void atomic_max(float* p, float v) {
  int* bits = reinterpret_cast<int*>(p);
  int old = *bits;
  while (__int_as_float(old) < v) {
    const int seen = atomicCAS(bits, old, __float_as_int(v));
    if (seen == old) break;
    old = seen;
  }
}

// What a product reads: the stored value, rounded to bfloat16 under bf16 inputs.
__device__ float product_input(const HeadInput& x, size_t i, bool bf16) {
  const float v = x.value(i);
  return bf16 && !x.bf16 ? __bfloat162float(__float2bfloat16_rn(v)) : v;
}

// Block (query row t, sequence b, head h): the largest scale * q_t . k_s over s <= t into max_logit[h].
__global__ void max_logit_kernel(AttentionShape s, HeadInput q, HeadInput k, float* max_logit) {
  extern __shared__ float q_row[];
  __shared__ float partial[kThreads];
  const unsigned rows = unsigned(s.seq);
  const int t = int(blockIdx.x % rows), bh = int(blockIdx.x / rows), h = bh % s.heads;
  const size_t q_at = head_start(s, s.q, bh) + size_t(t) * s.q.row, k_at = head_start(s, s.k, bh);
  for (int f = threadIdx.x; f < s.qk_dim; f += blockDim.x) q_row[f] = product_input(q, q_at + f, s.bf16);
  __syncthreads();
  float mx = -INFINITY;
  for (int key = threadIdx.x; key <= t; key += blockDim.x) {
    const size_t at = k_at + size_t(key) * s.k.row;
    float dot = 0;
    for (int f = 0; f < s.qk_dim; ++f) dot += q_row[f] * product_input(k, at + f, s.bf16);
    mx = fmaxf(mx, s.scale * dot);
  }
  partial[threadIdx.x] = mx;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) atomic_max(max_logit + h, partial[0]);
}

__global__ void clip_rows_kernel(QkClipRowsArgs a) {
  const int width = a.end - a.begin;
  const size_t n = size_t(a.heads) * width * a.cols;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int h = int(i / (size_t(width) * a.cols)), r = a.begin + int(i / a.cols % width), c = int(i % a.cols);
    float s = a.max_logit[h];
    for (int copy = 1; copy < a.copies; ++copy) s = fmaxf(s, a.max_logit[size_t(copy) * a.stride + h]);
    if (!(s > a.tau)) continue;
    const float gamma = a.tau / s, factor = a.power == 1.0f ? gamma : sqrtf(gamma);
    a.w[(size_t(h) * a.head_rows + r) * a.cols + c] *= factor;
  }
}

}  // namespace

void attention_max_logit(DeviceState* st, const AttentionForwardArgs& a) {
  const AttentionShape s = attention_shape(a, 1);
  const long long blocks = (long long)a.batch * a.heads * a.seq;
  MT_CHECK(blocks <= INT_MAX);
  max_logit_kernel<<<unsigned(blocks), kThreads, sizeof(float) * a.qk_dim, st->stream>>>(
      s, head_input(a.q, a.q_bf16), head_input(a.k, a.k_bf16), a.max_logit);
  MT_CUDA_CHECK_LAUNCH();
}

void qk_clip_rows(DeviceState* st, const QkClipRowsArgs& a) {
  if (a.heads == 0 || a.end <= a.begin || a.cols == 0) return;
  activate(st);
  const size_t n = size_t(a.heads) * (a.end - a.begin) * a.cols;
  const size_t cap = size_t(st->sm_count > 0 ? st->sm_count : 1) * 16, want = (n + kThreads - 1) / kThreads;
  clip_rows_kernel<<<unsigned(want < cap ? want : cap), kThreads, 0, st->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
