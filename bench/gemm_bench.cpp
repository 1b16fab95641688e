// GEMM throughput: the CPU reference sgemm (fp32) and, when a GPU is present, the CUDA
// backend's cuBLASLt gemm (bf16 inputs, fp32 accumulate; the fp32->bf16 rounding of A and B is
// part of the op and is timed with it). Prints one plain line per measurement, then a table of
// FP8 beside BF16 on DeepSeek-V3's shapes.
#include <algorithm>
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

// DeepSeek-V3's linear layers as [tokens, in] -> [tokens, out] (hidden 7168, expert hidden 2048,
// query rank 1536, key-value rank 512, 128 heads of 128 + 64 dims).
struct Linear {
  const char* name;
  int in, out;
};
constexpr Linear kLinears[] = {{"expert up", 7168, 2048},     {"expert down", 2048, 7168},
                               {"mla q down", 7168, 1536},    {"mla kv down", 7168, 512},
                               {"mla q up", 1536, 128 * 192}, {"mla kv up", 512, 128 * 256},
                               {"attn out", 128 * 128, 7168}};

enum class Form { forward, dgrad, wgrad };

// The GEMM of one training form of a linear layer over `tokens` rows, as the model issues it.
GemmArgs linear_gemm(Form form, int tokens, const Linear& l) {
  GemmArgs g;
  switch (form) {
    case Form::forward: g.m = tokens, g.n = l.out, g.k = l.in, g.trans_b = true; break;
    case Form::dgrad: g.m = tokens, g.n = l.in, g.k = l.out; break;
    case Form::wgrad: g.m = l.out, g.n = l.in, g.k = tokens, g.trans_a = true, g.beta = 1.0f; break;
  }
  g.fp8.a = form == Form::forward ? Fp8Operand::activation : Fp8Operand::gradient;
  g.fp8.b = form == Form::wgrad ? Fp8Operand::activation : Fp8Operand::weight;
  return g;
}

// Median milliseconds of one gemm: `samples` CUDA-event timings of `batch` calls back to back (so
// the host's per-call work overlaps the previous call's GPU work), after `warmup` calls.
double median_ms(const Backend& gpu, const GemmArgs& g, int warmup, int samples, int batch) {
  for (int i = 0; i < warmup; ++i) gpu.gemm(g);
  std::vector<double> ms(samples);
  for (double& t : ms)
    t = cuda_elapsed_ms(gpu, [&] {
          for (int i = 0; i < batch; ++i) gpu.gemm(g);
        }) / batch;
  std::nth_element(ms.begin(), ms.begin() + samples / 2, ms.end());
  return ms[samples / 2];
}

// FP8 (DeepSeek's recipe: 1x128 tiles, 128x128 weight blocks, power-of-two scales) beside BF16.
// Both times include the op's conversion of its fp32 inputs (rounding to bf16, or quantizing to
// fp8 with any transposition), as the trainer pays it.
void fp8_table(const Backend& gpu) {
  const Fp8Recipe recipe;
  std::printf("\n%-12s %-7s %6s %6s %6s  %10s %10s %7s\n", "layer", "form", "M", "N", "K", "bf16 TF/s", "fp8 TF/s",
              "fp8/bf16");
  for (int tokens : {4096, 8192, 16384})
    for (const Linear& l : kLinears)
      for (Form form : {Form::forward, Form::dgrad, Form::wgrad}) {
        GemmArgs g = linear_gemm(form, tokens, l);
        const size_t a = size_t(g.m) * g.k, b = size_t(g.k) * g.n, c = size_t(g.m) * g.n;
        std::vector<float> host(std::max({a, b, c}));
        for (size_t i = 0; i < host.size(); ++i) host[i] = float(int(i % 17) - 8) / 8.0f;
        float* buf[3];
        const size_t counts[3] = {a, b, c};
        for (int i = 0; i < 3; ++i) {
          buf[i] = static_cast<float*>(gpu.alloc(counts[i] * sizeof(float)));
          gpu.upload(buf[i], host.data(), counts[i] * sizeof(float));
        }
        g.a = buf[0], g.b = buf[1], g.c = buf[2];
        const double flops = 2.0 * double(g.m) * g.n * g.k;
        g.inputs = GemmInputs::bf16;
        const double bf16 = flops / median_ms(gpu, g, 3, 9, 5) / 1e9;
        g.inputs = GemmInputs::fp8;
        g.fp8.recipe = &recipe;
        const double fp8 = flops / median_ms(gpu, g, 3, 9, 5) / 1e9;
        const char* form_name = form == Form::forward ? "forward" : form == Form::dgrad ? "dgrad" : "wgrad";
        std::printf("%-12s %-7s %6d %6d %6d  %10.1f %10.1f %7.2f\n", l.name, form_name, g.m, g.n, g.k, bf16, fp8,
                    fp8 / bf16);
        std::fflush(stdout);
        for (float* p : buf) gpu.release(p);
      }
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
  fp8_table(gpu);
  cuda_backend_destroy(gpu);
  return 0;
}
