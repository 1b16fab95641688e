#pragma once
// Warp and block reductions shared by the kernels. Blocks must have a multiple of 32 threads (at most 1024).
#include <cuda_runtime.h>

#include "ops/backend/cuda_state.cuh"

namespace mt::cuda {

// *sum += scale * (the sum of values[0..n)) / divisor, computed by one block on the stream (device
// memory; sum not among the values; null: nothing): the end of ops that add a total to the step's.
void add_sum(DeviceState* s, const double* values, int n, double scale, double divisor, double* sum);

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T, typename Op>
__device__ T warp_reduce(T v, Op op) {
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// op over the v of every thread of the block, returned to every thread; `identity` pads the last step.
// The order of operations depends only on blockDim, so results are reproducible. The leading barrier
// lets a kernel call it repeatedly: no thread can still be reading the previous call's result.
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T identity) {
  __shared__ T per_warp[32];
  __shared__ T total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_reduce(v, op);
  __syncthreads();
  if (lane == 0) per_warp[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < int(blockDim.x >> 5) ? per_warp[lane] : identity;
    v = warp_reduce(v, op);
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

}  // namespace mt::cuda
