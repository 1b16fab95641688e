// The one-block sum of a few doubles that several ops end with (a loss total, a squared norm),
// read back to the host.
#include "ops/backend/cuda_check.cuh"
#include "ops/backend/launch.cuh"
#include "ops/backend/reduce.cuh"

namespace mt::cuda {

namespace {
constexpr int kSumThreads = 1024;

// Sum of v[0..n) by one block, in an order fixed by kSumThreads.
__global__ void sum_kernel(const double* v, int n, double* out) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += v[i];
  acc = block_reduce(acc, SumOp{}, 0.0);
  if (threadIdx.x == 0) *out = acc;
}
}  // namespace

double sum_to_host(DeviceState* s, const double* values, int n, double* out) {
  sum_kernel<<<1, kSumThreads, 0, s->stream>>>(values, n, out);
  MT_CUDA_CHECK_LAUNCH();
  return read_back(s, out);
}

}  // namespace mt::cuda
