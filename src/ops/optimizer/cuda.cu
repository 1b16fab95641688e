// The optimizer's ops on the GPU: clipping, the squared norm of many runs at once (per run, block
// partial sums in double, then one block adds each run's partials and the runs in order), the
// step's scalars and AdamW through the element rule the CPU reference uses
// (src/ops/optimizer/math.hpp). Clipping and AdamW read the step's norm from device memory.
#include <cub/block/block_reduce.cuh>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/launch.cuh"
#include "ops/optimizer/math.hpp"
#include "ops/backend/reduce.cuh"

namespace mt::cuda {

namespace {

constexpr int kRunBlocks = 128;  // blocks per run of the squared norm (partials summed by one block)
constexpr int kSumThreads = 1024;

__global__ void scale_kernel(float* x, size_t n, float factor, const double* norm_sq, double clip) {
  if (norm_sq) {
    factor = clip_factor(*norm_sq, clip);
    if (factor == 0.0f) return;
  }
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] *= factor;
}

// Block (b, y): runs y, y + gridDim.y, ...; of each, the elements b, b + kRunBlocks, ... (in blocks
// of kBlock) into partials[run][b].
__global__ void run_squares_kernel(const float* const* x, const size_t* n, int runs, double* partials) {
  using Reduce = cub::BlockReduce<double, kBlock>;
  __shared__ typename Reduce::TempStorage tmp;
  for (int r = blockIdx.y; r < runs; r += gridDim.y) {
    const float* __restrict__ v = x[r];
    double acc = 0;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n[r]; i += size_t(gridDim.x) * blockDim.x)
      acc += double(v[i]) * v[i];
    acc = Reduce(tmp).Sum(acc);
    if (threadIdx.x == 0) partials[size_t(r) * kRunBlocks + blockIdx.x] = acc;
    __syncthreads();  // tmp is used again by the next run
  }
}

// *sum += each run's total, run by run: the order of the CPU reference's additions.
__global__ void add_runs_kernel(const double* partials, int runs, double* sum) {
  double total = *sum;
  for (int r = 0; r < runs; ++r) {
    const double v = threadIdx.x < kRunBlocks ? partials[size_t(r) * kRunBlocks + threadIdx.x] : 0.0;
    const double run = block_reduce(v, SumOp{}, 0.0);
    total += run;
  }
  if (threadIdx.x == 0) *sum = total;
}

__global__ void sum_scalars_kernel(SumScalarsArgs a) {
  for (size_t i = 0; i < a.n; ++i) *a.sum += a.scale * a.x[i];
}

__global__ void adamw_kernel(AdamwArgs a) {
  if (!guard_passes(a.guard)) return;
  const AdamwStepValues s = *a.step;  // this step's, read on the device (a graph replays the launch)
  const float decay = a.decay ? float(s.decay) : 0.0f;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += size_t(gridDim.x) * blockDim.x)
    adamw_element(a.grad[i], a.value[i], a.m[i], a.v[i], a.beta1, a.beta2, s.lr, s.bias_correction1,
                  s.bias_correction2, a.eps, decay);
}

}  // namespace

void scale(DeviceState* s, const ScaleArgs& a) {
  if (a.n == 0) return;
  activate(s);
  scale_kernel<<<stride_grid(s, a.n, kBlock), kBlock, 0, s->stream>>>(a.x, a.n, a.factor, a.norm_sq, a.clip);
  MT_CUDA_CHECK_LAUNCH();
}

void sum_squares(DeviceState* s, const SumSquaresArgs& a) {
  if (a.runs == 0) return;
  activate(s);
  auto* partials =
      static_cast<double*>(scratch(s, kScratchReduce, size_t(a.runs) * kRunBlocks * sizeof(double)));
  const unsigned rows = unsigned(a.runs < 65535 ? a.runs : 65535);  // the grid's y limit
  run_squares_kernel<<<dim3(kRunBlocks, rows), kBlock, 0, s->stream>>>(a.x, a.n, a.runs, partials);
  MT_CUDA_CHECK_LAUNCH();
  add_runs_kernel<<<1, kSumThreads, 0, s->stream>>>(partials, a.runs, a.sum);
  MT_CUDA_CHECK_LAUNCH();
}

void sum_scalars(DeviceState* s, const SumScalarsArgs& a) {
  if (a.n == 0) return;
  activate(s);
  sum_scalars_kernel<<<1, 1, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

void adamw(DeviceState* s, const AdamwArgs& a) {
  if (a.n == 0) return;
  activate(s);
  adamw_kernel<<<stride_grid(s, a.n, kBlock), kBlock, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
