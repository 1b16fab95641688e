// The one-block sum of a few doubles that several ops end with (a loss total, a squared norm),
// added to a total in device memory: the host never waits for it.
#include "ops/backend/cuda_check.cuh"
#include "ops/backend/launch.cuh"
#include "ops/backend/reduce.cuh"

namespace mt::cuda {

namespace {
constexpr int kSumThreads = 1024;

// *sum += scale * (the sum of v[0..n)) / divisor, the sum in an order fixed by kSumThreads.
__global__ void add_sum_kernel(const double* v, int n, double scale, double divisor, double* sum) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += v[i];
  acc = block_reduce(acc, SumOp{}, 0.0);
  if (threadIdx.x == 0) *sum += scale * acc / divisor;
}
}  // namespace

void add_sum(DeviceState* s, const double* values, int n, double scale, double divisor, double* sum) {
  if (sum == nullptr) return;
  add_sum_kernel<<<1, kSumThreads, 0, s->stream>>>(values, n, scale, divisor, sum);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
