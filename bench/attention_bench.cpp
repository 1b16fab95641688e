// Causal attention throughput on the GPU: the CUDA backend's attention_forward and
// attention_backward with bf16 inputs, on cuDNN's fused attention ("on cudnn", where libcudnn loads)
// and on the own kernels ("on own": tensor cores for the head dims src/ops/attention/cuda_tc.cu is
// built for), and with fp32 (CUDA cores), on GPT-2's heads, 128-wide heads at seq 4096 and
// DeepSeek-V3's MLA heads (qk 192, v 128). One line per measurement; bench/attention_sdpa.py prints
// the same lines for PyTorch's scaled_dot_product_attention (its flash and cuDNN backends), so they
// read side by side.
// FLOPs are the useful ones of causal attention, as FlashAttention counts them: forward
// 2 * batch * heads * seq^2 / 2 * (qk + v), backward 2.5 times that (the recomputed scores and
// the kernels' second pass for dQ not counted).
// --cpu-stand-in: small cases on the strict CPU backend in the GPU's place, printed in the same
// lines (their names start "cpu-strict"), so that what reads these lines can be tried without a GPU.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "ops/backend/cuda_backend.hpp"
#include "ops/backend/device_timer.hpp"
#include "ops/ops.hpp"

namespace {

using namespace mt;

struct Case {
  const char* name;
  int batch, heads, seq, qk, v;
};
constexpr Case kCases[] = {{"gpt2", 8, 12, 1024, 64, 64},
                           {"d128 seq4096", 2, 16, 4096, 128, 128},
                           {"mla seq4096", 1, 16, 4096, 192, 128}};
constexpr Case kStandInCases[] = {{"cpu-strict gpt2 heads", 1, 2, 128, 64, 64},
                                  {"cpu-strict mla heads", 1, 2, 128, 192, 128}};

struct DeviceBuffer {
  const Backend& be;
  float* p;
  DeviceBuffer(const Backend& b, size_t n, float fill) : be(b) {
    p = static_cast<float*>(be.alloc(n * sizeof(float)));
    const std::vector<float> host(n, fill);
    be.upload(p, host.data(), n * sizeof(float));
  }
  ~DeviceBuffer() { be.release(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Milliseconds per call: 2 untimed calls, then the mean of `reps`, by the device's own clock (CUDA
// events on a GPU).
double ms_per_call(const Backend& gpu, const std::function<void()>& call, int reps) {
  call();
  call();
  DeviceTimer timer(gpu);
  timer.time([&] {
    for (int i = 0; i < reps; ++i) call();
  });
  return timer.take_seconds() * 1e3 / reps;
}

void run(const Backend& gpu, const Case& c, const std::string& name, GemmPrecision inputs, int reps) {
  const size_t rows = size_t(c.batch) * c.seq * c.heads;
  // Values of a few sizes, not zero: the softmax sees real spreads, and no product is trivially 0.
  DeviceBuffer q(gpu, rows * c.qk, 0.02f), k(gpu, rows * c.qk, -0.03f), v(gpu, rows * c.v, 0.5f);
  DeviceBuffer out(gpu, rows * c.v, 0), lse(gpu, rows, 0), dout(gpu, rows * c.v, 0.01f);
  DeviceBuffer dq(gpu, rows * c.qk, 0), dk(gpu, rows * c.qk, 0), dv(gpu, rows * c.v, 0);
  const AttentionForwardArgs f{.batch = c.batch, .seq = c.seq, .heads = c.heads, .qk_dim = c.qk, .v_dim = c.v,
                               .scale = 0.1f, .q = q.p, .k = k.p, .v = v.p, .out = out.p, .lse = lse.p,
                               .inputs = inputs};
  const AttentionBackwardArgs b{.batch = c.batch, .seq = c.seq, .heads = c.heads, .qk_dim = c.qk, .v_dim = c.v,
                                .scale = 0.1f, .q = q.p, .k = k.p, .v = v.p, .out = out.p, .lse = lse.p,
                                .dout = dout.p, .dq = dq.p, .dk = dk.p, .dv = dv.p, .inputs = inputs};
  const double fwd_ms = ms_per_call(gpu, [&] { gpu.attention_forward(f); }, reps);
  const double bwd_ms = ms_per_call(gpu, [&] { gpu.attention_backward(b); }, reps);
  const double fwd_flops = 2.0 * c.batch * c.heads * (double(c.seq) * c.seq / 2) * (c.qk + c.v);
  const double tflops = 3.5 * fwd_flops / ((fwd_ms + bwd_ms) * 1e-3) / 1e12;
  std::printf("attention moetrain %s %s batch=%d heads=%d seq=%d qk=%d v=%d: fwd+bwd %.1f TFLOP/s (fwd %.3f ms "
              "%.1f TFLOP/s, bwd %.3f ms %.1f TFLOP/s)\n",
              inputs == GemmPrecision::fp32 ? "fp32" : "bf16", name.c_str(), c.batch, c.heads, c.seq, c.qk, c.v, tflops,
              fwd_ms, fwd_flops / (fwd_ms * 1e-3) / 1e12, bwd_ms, 2.5 * fwd_flops / (bwd_ms * 1e-3) / 1e12);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string arg = argc > 1 ? argv[1] : "";
  if (argc > 2 || (argc == 2 && arg != "--cpu-stand-in")) {
    std::fprintf(stderr, "attention_bench: unknown argument '%s'\nusage: attention_bench [--cpu-stand-in]\n",
                 argc > 2 ? argv[2] : arg.c_str());
    return 2;
  }
  if (arg == "--cpu-stand-in") {
    Backend strict = cpu_strict_backend_create();
    for (GemmPrecision inputs : {GemmPrecision::bf16, GemmPrecision::fp32})
      for (const Case& c : kStandInCases) run(strict, c, c.name, inputs, 1);
    cpu_strict_backend_destroy(strict);
    return 0;
  }
  std::string why;
  if (!cuda_available(&why)) {
    std::printf("attention_bench: skipped: no GPU (%s)\n", why.c_str());
    return 0;
  }
  for (AttentionImpl impl : {AttentionImpl::cudnn, AttentionImpl::own}) {
    Backend gpu = cuda_backend_create(0, {.attention = impl});
    const std::string note = cuda_attention_note(gpu);
    if (impl == AttentionImpl::cudnn && note.rfind("own kernels", 0) == 0) {
      std::printf("attention_bench: cudnn skipped: %s\n", note.c_str());
    } else {
      for (const Case& c : kCases)
        run(gpu, c, c.name + std::string(" on ") + attention_impl_name(impl), GemmPrecision::bf16, 10);
    }
    cuda_backend_destroy(gpu);
  }
  Backend gpu = cuda_backend_create(0, {.attention = AttentionImpl::own});
  for (const Case& c : kCases) run(gpu, c, c.name, GemmPrecision::fp32, 3);
  cuda_backend_destroy(gpu);
  return 0;
}
