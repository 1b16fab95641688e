// The optimizer's ops on the GPU: scaling, the squared norm (block partial sums in double, then
// one block over the partials) and AdamW through the element rule the CPU reference uses
// (src/ops/optimizer/math.hpp).
#include <cub/block/block_reduce.cuh>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/launch.cuh"
#include "ops/optimizer/math.hpp"
#include "ops/backend/reduce.cuh"

namespace mt::cuda {

namespace {

__global__ void scale_kernel(float* x, size_t n, float factor) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] *= factor;
}

__global__ void partial_squares_kernel(const float* __restrict__ x, size_t n, double* partials) {
  using Reduce = cub::BlockReduce<double, kBlock>;
  __shared__ typename Reduce::TempStorage tmp;
  double v = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    v += double(x[i]) * x[i];
  v = Reduce(tmp).Sum(v);
  if (threadIdx.x == 0) partials[blockIdx.x] = v;
}

__global__ void adamw_kernel(AdamwArgs a) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += size_t(gridDim.x) * blockDim.x)
    adamw_element(a.grad[i], a.value[i], a.m[i], a.v[i], a.beta1, a.beta2, a.lr, a.bias_correction1,
                  a.bias_correction2, a.eps, a.decay);
}

}  // namespace

void scale(DeviceState* s, const ScaleArgs& a) {
  if (a.n == 0) return;
  activate(s);
  scale_kernel<<<stride_grid(s, a.n, kBlock), kBlock, 0, s->stream>>>(a.x, a.n, a.factor);
  MT_CUDA_CHECK_LAUNCH();
}

double sum_squares(DeviceState* s, const SumSquaresArgs& a) {
  if (a.n == 0) return 0.0;
  activate(s);
  const unsigned blocks = stride_grid(s, a.n, kBlock);
  auto* partials = static_cast<double*>(scratch(s, kScratchReduce, (size_t(blocks) + 1) * sizeof(double)));
  partial_squares_kernel<<<blocks, kBlock, 0, s->stream>>>(a.x, a.n, partials);
  MT_CUDA_CHECK_LAUNCH();
  return sum_to_host(s, partials, int(blocks), partials + blocks);
}

void adamw(DeviceState* s, const AdamwArgs& a) {
  if (a.n == 0) return;
  activate(s);
  adamw_kernel<<<stride_grid(s, a.n, kBlock), kBlock, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
