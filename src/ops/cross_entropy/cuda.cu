// Softmax cross-entropy on the GPU, the same semantics as cpu.cpp: rows with a negative
// target get loss 0 and zero gradient; dlogits = grad_scale * (softmax - onehot); the sum of the row losses
// is added to *sum as a double. One block per row (the grid takes any int row count; a 129k vocabulary is
// ~126 values per thread). exp runs in fp32 and the sum of exponentials, the log-sum-exp and the losses in
// double, as on the CPU. The total is reduced on the device in a fixed order, so it is reproducible, and
// stays there. Safe in place (dlogits == logits): a row's logits are all read
// before any of its gradients are written.
#include <cmath>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/cuda_state.cuh"
#include "ops/backend/launch.cuh"
#include "ops/backend/reduce.cuh"

namespace mt::cuda {

namespace {

constexpr int kMaxRowThreads = 1024;

__global__ void row_kernel(const float* logits, const int* targets, float* losses, float* dlogits, double* row_loss,
                           int vocab, float grad_scale) {
  const size_t row = blockIdx.x;
  const float* z = logits + row * vocab;
  float* dz = dlogits + row * vocab;
  const int target = targets[row];
  if (target < 0) {
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) dz[i] = 0.0f;
    if (threadIdx.x == 0) {
      losses[row] = 0.0f;
      row_loss[row] = 0.0;
    }
    return;
  }
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) mx = fmaxf(mx, z[i]);
  mx = block_reduce(mx, MaxOp{}, -INFINITY);
  double sum = 0.0;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) sum += double(expf(z[i] - mx));
  sum = block_reduce(sum, SumOp{}, 0.0);
  // Read before the barrier below; after it, the pass that overwrites the row in place may start.
  const float z_target = z[target];
  __syncthreads();
  if (threadIdx.x == 0) {
    const double loss = log(sum) + double(mx) - double(z_target);
    losses[row] = float(loss);
    row_loss[row] = loss;
  }
  const float inv_sum = float(1.0 / sum);
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    float g = grad_scale * (expf(z[i] - mx) * inv_sum);
    if (i == target) g -= grad_scale;
    dz[i] = g;
  }
}

}  // namespace

void cross_entropy(DeviceState* s, const CrossEntropyArgs& a) {
  if (a.rows <= 0 || a.vocab <= 0) return;
  activate(s);
  // Each row's loss, then the total.
  auto* buf = static_cast<double*>(scratch(s, kScratchReduce, size_t(a.rows) * sizeof(double)));
  row_kernel<<<a.rows, row_threads(a.vocab, kMaxRowThreads), 0, s->stream>>>(a.logits, a.targets, a.losses,
                                                                             a.dlogits, buf, a.vocab, a.grad_scale);
  MT_CUDA_CHECK_LAUNCH();
  add_sum(s, buf, a.rows, 1.0, a.divisor, a.sum);
}

}  // namespace mt::cuda
