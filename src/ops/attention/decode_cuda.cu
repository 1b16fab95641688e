// One new position's attention over a decoder's cache on the GPU (AttentionDecodeArgs), the
// same arithmetic as decode_cpu.cpp in three plain steps: every score, each
// head's softmax (one block per head), every output element. Decoding is one row at a time, so
// these run at launch latency, not bandwidth; the training kernels stay attention.cu's.
#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/cuda_state.cuh"
#include "ops/backend/launch.cuh"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void decode_scores(AttentionDecodeArgs a) {
  const int group = a.heads / a.kv_heads;
  const size_t n = size_t(a.heads) * a.length;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int h = int(i / a.length), s = int(i % a.length);
    const float* q = a.q + size_t(h) * a.qk_dim;
    const float* k = a.k + (size_t(s) * a.kv_heads + h / group) * a.qk_dim;
    float dot = 0;
    for (int f = 0; f < a.qk_dim; ++f) dot += q[f] * k[f];
    a.scores[i] = a.scale * dot;
  }
}

// One block per head: the scores become probabilities in place.
__global__ void decode_softmax(AttentionDecodeArgs a) {
  __shared__ float partial[kThreads];
  float* p = a.scores + size_t(blockIdx.x) * a.length;
  float mx = -INFINITY;
  for (int s = threadIdx.x; s < a.length; s += blockDim.x) mx = fmaxf(mx, p[s]);
  partial[threadIdx.x] = mx;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + half]);
    __syncthreads();
  }
  mx = partial[0];
  __syncthreads();
  float sum = 0;
  for (int s = threadIdx.x; s < a.length; s += blockDim.x) sum += p[s] = expf(p[s] - mx);
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  const float inv = 1.0f / partial[0];
  for (int s = threadIdx.x; s < a.length; s += blockDim.x) p[s] *= inv;
}

__global__ void decode_values(AttentionDecodeArgs a) {
  const int group = a.heads / a.kv_heads;
  const size_t n = size_t(a.heads) * a.v_dim;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int h = int(i / a.v_dim), f = int(i % a.v_dim);
    const float* p = a.scores + size_t(h) * a.length;
    const float* v = a.v + size_t(h / group) * a.v_dim + f;
    float acc = 0;
    for (int s = 0; s < a.length; ++s) acc += p[s] * v[size_t(s) * a.kv_heads * a.v_dim];
    a.out[i] = acc;
  }
}

}  // namespace

void attention_decode(DeviceState* s, const AttentionDecodeArgs& args) {
  if (args.length <= 0 || args.heads <= 0) return;
  AttentionDecodeArgs a = args;
  if (a.kv_heads == 0) a.kv_heads = a.heads;
  activate(s);
  const size_t scores = size_t(a.heads) * a.length, outs = size_t(a.heads) * a.v_dim;
  decode_scores<<<stride_grid(s, scores, kThreads), kThreads, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
  decode_softmax<<<a.heads, kThreads, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
  decode_values<<<stride_grid(s, outs, kThreads), kThreads, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
