// GEMM throughput: the CPU reference sgemm (fp32) and, when a GPU is present, the CUDA backend's
// GEMMs: square bf16 and fp32 products, then DeepSeek-V3's linear layers in each training form in
// bf16 and in FP8 (DeepSeek's recipe: 1x128 tiles, 128x128 weight blocks, power-of-two scales).
// A bf16 or FP8 line gives two rates: the op as the trainer calls it (its fp32 operands rounded to
// bfloat16, or quantized to FP8 with any transposition, inside the op and timed with it), and the
// matmul alone (the operands converted before the timer starts). An FP8 line names the cuBLASLt
// scale modes its GEMM ran with, for A/B, or fallback-fp32 when it ran as fp32 over dequantized
// values. Then the experts' grouped GEMMs of moe-1b and of DeepSeek-V3 (16 of its experts), ragged
// groups, each form timed on the path the backend takes (CUTLASS's grouped kernel on Hopper) and on
// the per-group path (one cuBLASLt call per expert after a download of the offsets), bf16 with
// operands already in bfloat16, FP8 forward from fp32 operands (quantization timed with it). The
// run ends with the backend's fallback lines, "none" included.
//   gemm cpu fp32 m=M n=N k=K : R GFLOP/s
//   gemm DEVICE bf16 [layer=L form=F] m=M n=N k=K : R TFLOP/s, matmul only R TFLOP/s
//   gemm DEVICE fp32 m=M n=N k=K : R TFLOP/s
//   gemm DEVICE fp8 layer=L form=F m=M n=N k=K scales=MODES : R TFLOP/s, matmul only R TFLOP/s, X.XXx bf16
//   grouped DEVICE bf16|fp8 model=M form=F groups=G rows=R n=N k=K path=P : R TFLOP/s, per-group R TFLOP/s, X.XXx
// DEVICE is cuda, or with --cpu-stand-in cpu-strict: the strict CPU backend in the GPU's place on
// small shapes, so that what reads these lines can be tried without a GPU (its FP8 is the CPU
// emulation, scales=cpu-emulation, which quantizes inside every call: matmul only n/a).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "ops/backend/cuda_backend.hpp"
#include "ops/backend/device_timer.hpp"
#include "ops/backend/fallback_counts.hpp"
#include "ops/grouped_gemm/cuda_paths.hpp"
#include "ops/ops.hpp"

namespace {

using namespace mt;
using Clock = std::chrono::steady_clock;

// Average seconds per gemm: `warmup` untimed calls, then `reps` timed ones. The backend's
// synchronize brackets the timed loop, so device work is fully counted.
double seconds_per_gemm(const Backend& be, const GemmArgs& g, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) be.gemm(g);
  be.synchronize();
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) be.gemm(g);
  be.synchronize();
  return std::chrono::duration<double>(Clock::now() - t0).count() / reps;
}

// Arbitrary (non-zero) values, the same on every backend.
std::vector<float> values(size_t n) {
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = float(int(i % 17) - 8) / 8.0f;
  return host;
}

// Times C[n,n] = A*B on the CPU reference; returns FLOP/s.
double cpu_gemm_flops(const Backend& be, int n, int warmup, int reps) {
  const size_t count = size_t(n) * n;
  const std::vector<float> a = values(count), b = values(count);
  std::vector<float> c(count);
  GemmArgs g;
  g.m = g.n = g.k = n;
  g.a = a.data(); g.b = b.data(); g.c = c.data();
  return 2.0 * double(n) * n * n / seconds_per_gemm(be, g, warmup, reps);
}

// DeepSeek-V3's linear layers as [tokens, in] -> [tokens, out] (hidden 7168, expert hidden 2048,
// query rank 1536, key-value rank 512, 128 heads of 128 + 64 dims).
struct Linear {
  const char* name;
  int in, out;
};
constexpr Linear kLinears[] = {{"expert-up", 7168, 2048},     {"expert-down", 2048, 7168},
                               {"mla-q-down", 7168, 1536},    {"mla-kv-down", 7168, 512},
                               {"mla-q-up", 1536, 128 * 192}, {"mla-kv-up", 512, 128 * 256},
                               {"attn-out", 128 * 128, 7168}};

enum class Form { forward, dgrad, wgrad };

// The GEMM of one training form of a linear layer over `tokens` rows, as the model issues it.
GemmArgs linear_gemm(Form form, int tokens, int in, int out) {
  GemmArgs g;
  switch (form) {
    case Form::forward: g.m = tokens, g.n = out, g.k = in, g.trans_b = true; break;
    case Form::dgrad: g.m = tokens, g.n = in, g.k = out; break;
    case Form::wgrad: g.m = out, g.n = in, g.k = tokens, g.trans_a = true, g.beta = 1.0f; break;
  }
  g.fp8.a = form == Form::forward ? Fp8Operand::activation : Fp8Operand::gradient;
  g.fp8.b = form == Form::wgrad ? Fp8Operand::activation : Fp8Operand::weight;
  return g;
}

// The backend under test and how long to time it.
struct Device {
  Backend be;
  const char* label;  // "cuda" or "cpu-strict"
  bool cuda;
  int warmup, samples, batch;
};

// Median seconds of one call: `samples` timings of `batch` calls back to back (so the host's
// per-call work overlaps the previous call's device work), after `warmup` calls. The device's
// own clock: CUDA events on a GPU.
double median_seconds(const Device& d, const std::function<void()>& call) {
  for (int i = 0; i < d.warmup; ++i) call();
  DeviceTimer timer(d.be);
  std::vector<double> s(d.samples);
  for (double& t : s) {
    timer.time([&] {
      for (int i = 0; i < d.batch; ++i) call();
    });
    t = timer.take_seconds() / d.batch;
  }
  std::nth_element(s.begin(), s.begin() + d.samples / 2, s.end());
  return s[d.samples / 2];
}

// g's operands and output on the device, with values(), and bfloat16 copies of A and B rounded by
// the device itself (copy_columns into bfloat16 rounds as the bf16 GEMM does).
class Operands {
 public:
  Operands(const Backend& be, GemmArgs& g) : be_(be) {
    const int a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
    const int b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
    a_ = upload(size_t(a_rows) * a_cols);
    b_ = upload(size_t(b_rows) * b_cols);
    c_ = upload(size_t(g.m) * g.n);
    a16_ = rounded(a_, a_rows, a_cols);
    b16_ = rounded(b_, b_rows, b_cols);
    g.a = a_, g.b = b_, g.c = c_;
  }
  ~Operands() {
    be_.release(a_);
    be_.release(b_);
    be_.release(c_);
    be_.release(a16_);
    be_.release(b16_);
  }
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;

  // g with its operands in bfloat16 already: the bf16 GEMM without its rounding.
  GemmArgs pre_rounded(GemmArgs g) const {
    g.a = g.b = nullptr;
    g.a_bf16 = a16_, g.b_bf16 = b16_;
    return g;
  }

 private:
  float* upload(size_t n) {
    auto* p = static_cast<float*>(be_.alloc(n * sizeof(float)));
    be_.upload(p, values(n).data(), n * sizeof(float));
    return p;
  }
  Bf16* rounded(const float* x, int rows, int cols) {
    auto* p = static_cast<Bf16*>(be_.alloc(size_t(rows) * cols * sizeof(Bf16)));
    be_.copy_columns({.rows = rows, .cols = cols, .src = x, .src_stride = cols, .dst_stride = cols, .dst_bf16 = p});
    return p;
  }
  const Backend& be_;
  float *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
  Bf16 *a16_ = nullptr, *b16_ = nullptr;
};

double tflops(const GemmArgs& g, double seconds) { return 2.0 * double(g.m) * g.n * g.k / seconds / 1e12; }

// The bf16 line of g over `ops`; returns its TFLOP/s as the trainer pays them.
double bf16_line(const Device& d, GemmArgs g, const Operands& ops, const std::string& fields) {
  g.inputs = GemmPrecision::bf16;
  const double op = tflops(g, median_seconds(d, [&] { d.be.gemm(g); }));
  const GemmArgs bare = ops.pre_rounded(g);
  const double matmul = tflops(g, median_seconds(d, [&] { d.be.gemm(bare); }));
  std::printf("gemm %s bf16 %sm=%d n=%d k=%d : %.4g TFLOP/s, matmul only %.4g TFLOP/s\n", d.label, fields.c_str(),
              g.m, g.n, g.k, op, matmul);
  return op;
}

// The FP8 line of g (DeepSeek's recipe) beside its bf16 rate.
void fp8_line(const Device& d, GemmArgs g, const std::string& fields, double bf16) {
  const Fp8Recipe recipe;
  g.inputs = GemmPrecision::fp8;
  g.fp8.recipe = &recipe;
  const double op = tflops(g, median_seconds(d, [&] { d.be.gemm(g); }));
  // What the timed calls ran, read before anything else runs an FP8 GEMM.
  const std::string scales = d.cuda ? cuda_fp8_scaling_used(d.be) : "cpu-emulation";
  char matmul[48] = "n/a";
  if (d.cuda) {
    const std::function<void()> bare = cuda_fp8_matmul_only(d.be, g);
    std::snprintf(matmul, sizeof matmul, "%.4g TFLOP/s", tflops(g, median_seconds(d, bare)));
  }
  std::printf("gemm %s fp8 %sm=%d n=%d k=%d scales=%s : %.4g TFLOP/s, matmul only %s, %.2fx bf16\n", d.label,
              fields.c_str(), g.m, g.n, g.k, scales.c_str(), op, matmul, op / bf16);
}

GemmArgs square(int n) {
  GemmArgs g;
  g.m = g.n = g.k = n;
  return g;
}

// Square products, then every linear layer's three forms (widths divided by `shrink`) in bf16 and
// FP8.
void device_lines(const Device& d, const std::vector<int>& squares, int fp32_square, const std::vector<int>& tokens,
                  int shrink) {
  for (int n : squares) {
    GemmArgs g = square(n);
    const Operands ops(d.be, g);
    bf16_line(d, g, ops, "");
  }
  // fp32 (no TF32) for comparison: the precision the parity test holds the bf16 path against.
  GemmArgs g = square(fp32_square);
  const Operands ops(d.be, g);
  std::printf("gemm %s fp32 m=%d n=%d k=%d : %.4g TFLOP/s\n", d.label, g.m, g.n, g.k,
              tflops(g, median_seconds(d, [&] { d.be.gemm(g); })));
  for (int t : tokens)
    for (const Linear& l : kLinears)
      for (Form form : {Form::forward, Form::dgrad, Form::wgrad}) {
        GemmArgs lg = linear_gemm(form, t, l.in / shrink, l.out / shrink);
        const Operands lops(d.be, lg);
        const char* f = form == Form::forward ? "forward" : form == Form::dgrad ? "dgrad" : "wgrad";
        const std::string fields = std::string("layer=") + l.name + " form=" + f + " ";
        fp8_line(d, lg, fields, bf16_line(d, lg, lops, fields));
        std::fflush(stdout);
      }
}

// What fell back, over the whole run.
void fallback_lines(const Device& d) {
  const FallbackCounts fallbacks = backend_fallbacks(d.be);
  for (FallbackKind kind : kFallbackKinds) std::printf("%s\n", fallbacks.line(kind).c_str());
}

// An MoE layer's experts: `groups` of them over `rows` routed rows, model width dim, expert width hidden.
struct Experts {
  const char* model;
  int groups, rows, dim, hidden;
};

// Ragged group sizes summing to `rows`: from half to one and a half times the mean, and one empty group.
std::vector<int> ragged_offsets(int groups, int rows) {
  std::vector<int> off{0};
  for (int g = 0; g < groups; ++g) off.push_back(g == 1 ? 0 : (g * 37 % 16 + 8) * (rows / groups) / 16);
  for (int g = 0; g < groups; ++g) off[g + 1] += off[g];
  off.back() = rows;  // the last group takes the remainder
  return off;
}

// Device copies of the experts' operands (values()), fp32 and bfloat16; released with the object.
class GroupedOperands {
 public:
  GroupedOperands(const Backend& be, const Experts& e) : be_(be) {
    const std::vector<int> off = ragged_offsets(e.groups, e.rows);
    offsets_ = static_cast<int*>(be.alloc(off.size() * sizeof(int)));
    be.upload(offsets_, off.data(), off.size() * sizeof(int));
    const size_t weights = size_t(e.groups) * e.dim * e.hidden, rows_wide = size_t(e.rows) * std::max(e.dim, e.hidden);
    for (auto [f, h, n] : {std::tuple{&w_, &w16_, weights}, {&x_, &x16_, rows_wide}, {&y_, &y16_, rows_wide}}) {
      *f = static_cast<float*>(be.alloc(n * sizeof(float)));
      be.upload(*f, values(n).data(), n * sizeof(float));
      *h = static_cast<Bf16*>(be.alloc(n * sizeof(Bf16)));
      be.copy_columns({.rows = 1, .cols = int(n), .src = *f, .src_stride = int(n), .dst_stride = int(n), .dst_bf16 = *h});
    }
    out_ = static_cast<float*>(be.alloc(std::max(rows_wide, weights) * sizeof(float)));
  }
  ~GroupedOperands() {
    for (void* p : {static_cast<void*>(offsets_), static_cast<void*>(w_), static_cast<void*>(x_),
                    static_cast<void*>(y_), static_cast<void*>(w16_), static_cast<void*>(x16_),
                    static_cast<void*>(y16_), static_cast<void*>(out_)})
      be_.release(p);
  }
  GroupedOperands(const GroupedOperands&) = delete;
  GroupedOperands& operator=(const GroupedOperands&) = delete;

  // The up-projection's three forms (gate and up have its shape): forward y = x W^T, the input
  // gradient dx = dy W and the weight gradient dW += dy^T x, with W [hidden, dim].
  GroupedGemmArgs form(const Experts& e, Form f, GemmPrecision inputs) const {
    GroupedGemmArgs g{.groups = e.groups, .offsets = offsets_, .c = out_, .inputs = inputs};
    const bool bf16 = inputs == GemmPrecision::bf16;
    switch (f) {
      case Form::forward:
        g.m = e.rows, g.n = e.hidden, g.k = e.dim, g.trans_b = true;
        if (bf16) g.a_bf16 = x16_, g.b_bf16 = w16_;
        else g.a = x_, g.b = w_;
        break;
      case Form::dgrad:
        g.m = e.rows, g.n = e.dim, g.k = e.hidden, g.a_bf16 = y16_, g.b_bf16 = w16_;
        break;
      case Form::wgrad:
        g.ragged = Ragged::reduce, g.m = e.hidden, g.n = e.dim, g.k = e.rows, g.beta = 1.0f;
        g.a_bf16 = y16_, g.b_bf16 = x16_;
        break;
    }
    return g;
  }

 private:
  const Backend& be_;
  int* offsets_ = nullptr;
  float *w_ = nullptr, *x_ = nullptr, *y_ = nullptr, *out_ = nullptr;
  Bf16 *w16_ = nullptr, *x16_ = nullptr, *y16_ = nullptr;
};

// Each form of e's grouped GEMM on the backend's path and, on CUDA, on the per-group path.
void grouped_lines(const Device& d, const Experts& e) {
  const GroupedOperands ops(d.be, e);
  const Fp8Recipe recipe;
  const std::pair<Form, GemmPrecision> runs[] = {{Form::forward, GemmPrecision::bf16},
                                                 {Form::dgrad, GemmPrecision::bf16},
                                                 {Form::wgrad, GemmPrecision::bf16},
                                                 {Form::forward, GemmPrecision::fp8}};
  for (const auto& [form, inputs] : runs) {
    GroupedGemmArgs g = ops.form(e, form, inputs);
    g.fp8 = {.recipe = &recipe};
    const double flop = 2.0 * double(g.m) * g.n * g.k;
    const double ours = flop / median_seconds(d, [&] { d.be.grouped_gemm(g); }) / 1e12;
    const char* path = d.cuda ? cuda_grouped_gemm_path(d.be, g) : "cpu-reference";
    char loop[48] = "n/a", ratio[16] = "n/a";
    if (d.cuda) {
      const double per_group = flop / median_seconds(d, [&] { cuda_grouped_gemm_per_group(d.be, g); }) / 1e12;
      std::snprintf(loop, sizeof loop, "%.4g TFLOP/s", per_group);
      std::snprintf(ratio, sizeof ratio, "%.2fx", ours / per_group);
    }
    const char* f = form == Form::forward ? "forward" : form == Form::dgrad ? "dgrad" : "wgrad";
    std::printf("grouped %s %s model=%s form=%s groups=%d rows=%d n=%d k=%d path=%s : %.4g TFLOP/s, per-group %s, "
                "%s\n", d.label, inputs == GemmPrecision::fp8 ? "fp8" : "bf16", e.model, f, e.groups,
                g.ragged == Ragged::rows ? g.m : g.k, g.n, g.ragged == Ragged::rows ? g.k : g.m, path, ours, loop,
                ratio);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string arg = argc > 1 ? argv[1] : "";
  if (argc > 2 || (argc == 2 && arg != "--cpu-stand-in")) {
    std::fprintf(stderr, "gemm_bench: unknown argument '%s'\nusage: gemm_bench [--cpu-stand-in]\n",
                 argc > 2 ? argv[2] : arg.c_str());
    return 2;
  }
  if (arg == "--cpu-stand-in") {
    // Shapes small enough for the strict CPU backend: DeepSeek-V3's layers at a sixteenth of their
    // widths over 128 tokens, the same lines as a GPU's.
    Device d{cpu_strict_backend_create(), "cpu-strict", false, 1, 3, 1};
    device_lines(d, {128}, 128, {128}, 16);
    grouped_lines(d, {"moe-1b/8", 4, 512, 256, 128});
    fallback_lines(d);
    cpu_strict_backend_destroy(d.be);
    return 0;
  }
  const Backend cpu = cpu_backend();
  for (int n : {512, 1024, 2048}) {
    const double f = cpu_gemm_flops(cpu, n, 1, n <= 1024 ? 10 : 3);
    std::printf("gemm cpu fp32 m=%d n=%d k=%d : %.1f GFLOP/s\n", n, n, n, f / 1e9);
    std::fflush(stdout);
  }

  std::string why;
  if (!cuda_available(&why)) {
    std::printf("gemm_bench: GPU part skipped: no GPU (%s)\n", why.c_str());
    return 0;
  }
  Device d{cuda_backend_create(0), "cuda", true, 3, 9, 5};
  device_lines(d, {4096, 8192}, 4096, {4096, 8192, 16384}, 1);
  // moe-1b's micro-batch (4 x 512 tokens, top-2 of 16 experts); 16 of DeepSeek-V3's experts at 512 rows each.
  grouped_lines(d, {"moe-1b", 16, 4096, 2048, 1024});
  grouped_lines(d, {"dsv3-16", 16, 8192, 7168, 2048});
  fallback_lines(d);
  cuda_backend_destroy(d.be);
  return 0;
}
