// GPU parity: every CUDA op against the CPU reference on identical deterministic inputs.
// Prints one PASS/FAIL line per check and a summary; exits 0 when all pass, 1 otherwise, and
// 77 (the conventional "skipped" status) when there is no usable GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ops/cuda_backend.hpp"
#include "ops/ops.hpp"

namespace {

using namespace mt;

// Deterministic uniform numbers in [lo, hi); each check seeds its own generator.
struct Lcg {
  uint64_t state;
  explicit Lcg(uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 1) {}
  float next(float lo, float hi) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * float(double(state >> 40) / double(1ull << 24));
  }
};

std::vector<float> random_values(size_t n, Lcg& rng, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.next(lo, hi);
  return v;
}

// max |got - want| / max |want|; NaN anywhere counts as infinitely wrong.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(double(got[i]) - want[i]);
    if (std::isnan(d)) return INFINITY;
    diff = std::max(diff, d);
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
  return diff;
}

struct Report {
  int passed = 0, failed = 0;
  void check(const std::string& name, double err, double tol) {
    const bool ok = err < tol || (tol == 0 && err == 0);
    std::printf("%s %s err=%.3g (tol %.0e)\n", ok ? "PASS" : "FAIL", name.c_str(), err, tol);
    (ok ? passed : failed)++;
  }
};

// A float buffer on the GPU, `offset` floats into its allocation (to test unaligned sub-views).
class DeviceFloats {
 public:
  DeviceFloats(const Backend& be, const std::vector<float>& host, size_t offset = 0)
      : be_(be), n_(host.size()), base_(static_cast<float*>(be.ops->alloc(be.state, (host.size() + offset) * 4))),
        p_(base_ + offset) {
    be_.ops->upload(be_.state, p_, host.data(), n_ * sizeof(float));
  }
  ~DeviceFloats() { be_.ops->release(be_.state, base_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* get() const { return p_; }
  std::vector<float> download() const {
    std::vector<float> v(n_);
    be_.ops->synchronize(be_.state);
    be_.ops->download(be_.state, v.data(), p_, n_ * sizeof(float));
    return v;
  }

 private:
  const Backend& be_;
  size_t n_;
  float* base_;
  float* p_;
};

void check_gemm(Report& rep, const Backend& cpu, const Backend& gpu, int m, int n, int k, bool ta, bool tb,
                GemmInputs inputs, size_t offset, uint64_t seed) {
  Lcg rng(seed);
  const std::vector<float> a = random_values(size_t(m) * k, rng), b = random_values(size_t(k) * n, rng),
                           c0 = random_values(size_t(m) * n, rng);
  GemmArgs g;
  g.m = m; g.n = n; g.k = k; g.trans_a = ta; g.trans_b = tb;
  g.alpha = 0.75f; g.beta = -0.5f; g.inputs = inputs;

  std::vector<float> want = c0;
  g.a = a.data(); g.b = b.data(); g.c = want.data();
  cpu.gemm(g);

  DeviceFloats da(gpu, a, offset), db(gpu, b, offset), dc(gpu, c0, offset);
  g.a = da.get(); g.b = db.get(); g.c = dc.get();
  gpu.gemm(g);

  char name[160];
  std::snprintf(name, sizeof name, "gemm %s m=%d n=%d k=%d trans_a=%d trans_b=%d%s",
                inputs == GemmInputs::bf16 ? "bf16" : "fp32", m, n, k, int(ta), int(tb), offset ? " unaligned" : "");
  rep.check(name, relative_error(dc.download(), want), 1e-4);
}

void check_rmsnorm(Report& rep, const Backend& cpu, const Backend& gpu, int rows, int dim, uint64_t seed) {
  Lcg rng(seed);
  const std::vector<float> x = random_values(size_t(rows) * dim, rng, -2.0f, 2.0f);
  const std::vector<float> w = random_values(dim, rng, 0.5f, 1.5f);
  const std::vector<float> dy = random_values(size_t(rows) * dim, rng);
  const std::vector<float> dw0 = random_values(dim, rng);
  const std::string shape = " rows=" + std::to_string(rows) + " dim=" + std::to_string(dim);
  DeviceFloats dx_in(gpu, x), dw(gpu, w), ddy(gpu, dy);

  // Forward: y and rstd.
  std::vector<float> y(x.size()), rstd(rows);
  cpu.rmsnorm_forward({rows, dim, 1e-5f, x.data(), w.data(), y.data(), rstd.data()});
  DeviceFloats gy(gpu, y), grstd(gpu, rstd);
  gpu.rmsnorm_forward({rows, dim, 1e-5f, dx_in.get(), dw.get(), gy.get(), grstd.get()});
  rep.check("rmsnorm_forward" + shape,
            std::max(relative_error(gy.download(), y), relative_error(grstd.download(), rstd)), 1e-5);

  // Backward passes take the CPU's rstd on both sides, so each check covers one kernel only.
  DeviceFloats drstd(gpu, rstd);
  std::vector<float> dx(x.size());
  cpu.rmsnorm_backward_input({rows, dim, dy.data(), x.data(), w.data(), rstd.data(), dx.data()});
  DeviceFloats gdx(gpu, std::vector<float>(x.size(), NAN));
  gpu.rmsnorm_backward_input({rows, dim, ddy.get(), dx_in.get(), dw.get(), drstd.get(), gdx.get()});
  rep.check("rmsnorm_backward_input" + shape, relative_error(gdx.download(), dx), 1e-5);

  std::vector<float> dweight = dw0;
  cpu.rmsnorm_backward_weight({rows, dim, dy.data(), x.data(), rstd.data(), dweight.data()});
  DeviceFloats gdw(gpu, dw0);
  gpu.rmsnorm_backward_weight({rows, dim, ddy.get(), dx_in.get(), drstd.get(), gdw.get()});
  const std::vector<float> first = gdw.download();
  rep.check("rmsnorm_backward_weight" + shape, relative_error(first, dweight), 1e-5);

  // Same inputs again must give bitwise the same gradient (no atomics, fixed order).
  DeviceFloats gdw2(gpu, dw0);
  gpu.rmsnorm_backward_weight({rows, dim, ddy.get(), dx_in.get(), drstd.get(), gdw2.get()});
  const std::vector<float> second = gdw2.download();
  double diff = 0;
  for (size_t i = 0; i < first.size(); ++i) diff = std::max(diff, std::fabs(double(first[i]) - second[i]));
  rep.check("rmsnorm_backward_weight reproducible" + shape, diff, 0);
}

// Attention forward (out, lse) and backward (dq, dk, dv) against the CPU reference. GPU outputs
// start as NaN, so an element a kernel fails to write fails the check. The backward runs on the
// CPU's out and lse on both sides, so each check covers one direction. fp32 throughout; the GPU
// sums in another order than BLAS (tiles of 32 keys, online rescaling), which moves results by a
// few ulps of the largest element, well inside 1e-5.
void check_attention(Report& rep, const Backend& cpu, const Backend& gpu, int batch, int seq, int heads, int qk_dim,
                     int v_dim, uint64_t seed) {
  Lcg rng(seed);
  const size_t nq = size_t(batch) * seq * heads * qk_dim, nv = size_t(batch) * seq * heads * v_dim;
  const size_t nrow = size_t(batch) * heads * seq;
  const std::vector<float> q = random_values(nq, rng), k = random_values(nq, rng), v = random_values(nv, rng);
  const std::vector<float> dout = random_values(nv, rng);
  const float scale = 1.0f / std::sqrt(float(qk_dim));
  char shape[160];
  std::snprintf(shape, sizeof shape, " batch=%d seq=%d heads=%d qk=%d v=%d", batch, seq, heads, qk_dim, v_dim);

  std::vector<float> out(nv), lse(nrow);
  cpu.attention_forward({.batch = batch, .seq = seq, .heads = heads, .qk_dim = qk_dim, .v_dim = v_dim,
                         .scale = scale, .q = q.data(), .k = k.data(), .v = v.data(), .out = out.data(),
                         .lse = lse.data()});
  DeviceFloats gq(gpu, q), gk(gpu, k), gv(gpu, v), gdout(gpu, dout);
  DeviceFloats gout(gpu, std::vector<float>(nv, NAN)), glse(gpu, std::vector<float>(nrow, NAN));
  gpu.attention_forward({.batch = batch, .seq = seq, .heads = heads, .qk_dim = qk_dim, .v_dim = v_dim,
                         .scale = scale, .q = gq.get(), .k = gk.get(), .v = gv.get(), .out = gout.get(),
                         .lse = glse.get()});
  rep.check(std::string("attention_forward out") + shape, relative_error(gout.download(), out), 1e-5);
  rep.check(std::string("attention_forward lse") + shape, relative_error(glse.download(), lse), 1e-5);

  std::vector<float> dq(nq), dk(nq), dv(nv);
  cpu.attention_backward({.batch = batch, .seq = seq, .heads = heads, .qk_dim = qk_dim, .v_dim = v_dim,
                          .scale = scale, .q = q.data(), .k = k.data(), .v = v.data(), .out = out.data(),
                          .lse = lse.data(), .dout = dout.data(), .dq = dq.data(), .dk = dk.data(), .dv = dv.data()});
  DeviceFloats cpu_out(gpu, out), cpu_lse(gpu, lse);
  auto run_backward = [&](const DeviceFloats& gdq, const DeviceFloats& gdk, const DeviceFloats& gdv) {
    gpu.attention_backward({.batch = batch, .seq = seq, .heads = heads, .qk_dim = qk_dim, .v_dim = v_dim,
                            .scale = scale, .q = gq.get(), .k = gk.get(), .v = gv.get(), .out = cpu_out.get(),
                            .lse = cpu_lse.get(), .dout = gdout.get(), .dq = gdq.get(), .dk = gdk.get(),
                            .dv = gdv.get()});
  };
  DeviceFloats gdq(gpu, std::vector<float>(nq, NAN)), gdk(gpu, std::vector<float>(nq, NAN));
  DeviceFloats gdv(gpu, std::vector<float>(nv, NAN));
  run_backward(gdq, gdk, gdv);
  const std::vector<float> first_dq = gdq.download(), first_dk = gdk.download(), first_dv = gdv.download();
  rep.check(std::string("attention_backward dq") + shape, relative_error(first_dq, dq), 1e-5);
  rep.check(std::string("attention_backward dk") + shape, relative_error(first_dk, dk), 1e-5);
  rep.check(std::string("attention_backward dv") + shape, relative_error(first_dv, dv), 1e-5);

  // Same inputs again must give bitwise the same gradients (no atomics, fixed order).
  DeviceFloats gdq2(gpu, std::vector<float>(nq, NAN)), gdk2(gpu, std::vector<float>(nq, NAN));
  DeviceFloats gdv2(gpu, std::vector<float>(nv, NAN));
  run_backward(gdq2, gdk2, gdv2);
  const double diff = std::max({max_abs_diff(first_dq, gdq2.download()), max_abs_diff(first_dk, gdk2.download()),
                                max_abs_diff(first_dv, gdv2.download())});
  rep.check(std::string("attention_backward reproducible") + shape, diff, 0);
}

}  // namespace

int main() {
  std::string why;
  if (!cuda_available(&why)) {
    std::printf("gpu_parity: skipped: no GPU (%s)\n", why.c_str());
    return 77;
  }
  Backend gpu = cuda_backend_create(0);
  const Backend cpu = cpu_backend();
  std::printf("gpu_parity: comparing backend '%s' against '%s'\n", gpu.ops->name, cpu.ops->name);

  Report rep;
  uint64_t seed = 1;
  const int shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {64, 48, 80}, {257, 129, 65}, {512, 512, 512}};
  for (GemmInputs inputs : {GemmInputs::bf16, GemmInputs::fp32})
    for (const auto& s : shapes)
      for (int t = 0; t < 4; ++t) check_gemm(rep, cpu, gpu, s[0], s[1], s[2], t & 1, t & 2, inputs, 0, seed++);
  // Sub-views of an allocation are only 4-byte aligned; cuBLASLt must be told so.
  for (GemmInputs inputs : {GemmInputs::bf16, GemmInputs::fp32})
    for (int t = 0; t < 4; ++t) check_gemm(rep, cpu, gpu, 257, 129, 65, t & 1, t & 2, inputs, 1, seed++);

  const int norm_shapes[][2] = {{1, 1}, {3, 7}, {64, 256}, {257, 1000}, {1000, 300}, {16, 7168}};
  for (const auto& s : norm_shapes) check_rmsnorm(rep, cpu, gpu, s[0], s[1], seed++);

  // MHA and MLA head sizes, sequences that are not tile multiples, two positions, many heads, and
  // the largest head dims the kernels promise (256 and 256).
  const int attention_shapes[][5] = {{2, 100, 3, 64, 64}, {1, 130, 2, 192, 128}, {2, 2, 2, 16, 8},
                                     {3, 33, 7, 32, 48}, {1, 70, 1, 256, 256}};
  for (const auto& s : attention_shapes) check_attention(rep, cpu, gpu, s[0], s[1], s[2], s[3], s[4], seed++);

  cuda_backend_destroy(gpu);
  std::printf("%d passed, %d failed\n", rep.passed, rep.failed);
  return rep.failed == 0 ? 0 : 1;
}
