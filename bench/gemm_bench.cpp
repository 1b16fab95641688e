// GEMM throughput: the CPU reference sgemm (fp32) and, when a GPU is present, the CUDA
// backend's cuBLASLt gemm (bf16 inputs, fp32 accumulate; the fp32->bf16 rounding of A and B is
// part of the op and is timed with it). Prints one plain line per measurement.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ops/cuda_backend.hpp"
#include "ops/ops.hpp"

namespace {

using namespace mt;
using Clock = std::chrono::steady_clock;

// Average seconds per gemm: `warmup` untimed calls, then `reps` timed ones. The backend's
// synchronize brackets the timed loop, so device work is fully counted.
double seconds_per_gemm(const Backend& be, const GemmArgs& g, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) be.gemm(g);
  be.ops->synchronize(be.state);
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) be.gemm(g);
  be.ops->synchronize(be.state);
  return std::chrono::duration<double>(Clock::now() - t0).count() / reps;
}

// Times C[n,n] = A*B on `be` with arbitrary (non-zero) inputs; returns FLOP/s.
double gemm_flops(const Backend& be, int n, GemmInputs inputs, int warmup, int reps) {
  const size_t count = size_t(n) * n;
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = float(int(i % 17) - 8) / 8.0f;
  float* buf[3];
  for (float*& p : buf) {
    p = static_cast<float*>(be.ops->alloc(be.state, count * sizeof(float)));
    be.ops->upload(be.state, p, host.data(), count * sizeof(float));
  }
  GemmArgs g;
  g.m = g.n = g.k = n;
  g.a = buf[0]; g.b = buf[1]; g.c = buf[2];
  g.inputs = inputs;
  const double s = seconds_per_gemm(be, g, warmup, reps);
  for (float* p : buf) be.ops->release(be.state, p);
  return 2.0 * double(n) * n * n / s;
}

}  // namespace

int main() {
  const Backend cpu = cpu_backend();
  for (int n : {512, 1024, 2048}) {
    const double f = gemm_flops(cpu, n, GemmInputs::fp32, 1, n <= 1024 ? 10 : 3);
    std::printf("gemm cpu fp32 m=%d n=%d k=%d : %.1f GFLOP/s\n", n, n, n, f / 1e9);
    std::fflush(stdout);
  }

  std::string why;
  if (!cuda_available(&why)) {
    std::printf("gemm_bench: GPU part skipped: no GPU (%s)\n", why.c_str());
    return 0;
  }
  Backend gpu = cuda_backend_create(0);
  for (int n : {4096, 8192}) {
    const double f = gemm_flops(gpu, n, GemmInputs::bf16, 5, n <= 4096 ? 100 : 30);
    std::printf("gemm cuda bf16 m=%d n=%d k=%d : %.1f TFLOP/s\n", n, n, n, f / 1e12);
  }
  // fp32 (no TF32) for comparison: the precision the parity test holds the bf16 path against.
  const double f32 = gemm_flops(gpu, 4096, GemmInputs::fp32, 2, 10);
  std::printf("gemm cuda fp32 m=4096 n=4096 k=4096 : %.1f TFLOP/s\n", f32 / 1e12);
  cuda_backend_destroy(gpu);
  return 0;
}
