// GPU parity: every CUDA op against the CPU reference on identical random inputs.
// Every buffer the GPU only writes starts as NaN, so a kernel that skips an element fails. Buffers it
// updates (accumulated gradients, in-place ops) start from random values unlike the answer.
// The checks come in named groups (--list), run all or some (--only); each prints one PASS/FAIL
// line per check, the run ends with its fallback lines and a summary. Exits 0 when all pass, 1
// otherwise, 2 on a wrong command line, and 77 (the conventional "skipped" status) when there is
// no usable GPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include "ops/backend/cuda_backend.hpp"
#include "ops/backend/device_timer.hpp"
#include "ops/backend/fallback_counts.hpp"
#include "ops/ops.hpp"
#include "parity.hpp"

namespace {

using namespace mt;

// Tolerances, relative to the largest expected value of a check.
// fp32 math that differs from the CPU only in rounding (fused multiply-adds, an ulp or two in expf, cos, sin;
// summation order within a row).
constexpr double kTol = 1e-5;
// The GPU performs the same IEEE operations in the same order as the CPU (copies, one add per element, the
// embedding gradient summed in row order), so anything but bitwise equality is a bug.
constexpr double kExact = 0;

std::vector<float> nans(size_t n) { return std::vector<float>(n, NAN); }

double relative_error(double got, double want) {
  const double d = std::fabs(got - want);
  if (std::isnan(d)) return INFINITY;
  return want != 0 ? d / std::fabs(want) : d;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
  return diff;
}

using parity::DeviceVec;
using parity::Lcg;
using parity::random_values;
using parity::relative_error;
using parity::Report;
using DeviceFloats = DeviceVec<float>;
using DeviceInts = DeviceVec<int>;

// beta == 0 makes C output only: the CPU starts from zeros, the GPU from NaN, which it must not read.
// `path`: how gpu runs GEMMs, when not as it chooses (in the check's name).
void check_gemm(Report& rep, const Backend& cpu, const Backend& gpu, int m, int n, int k, bool ta, bool tb,
                GemmPrecision inputs, float beta, size_t offset, uint64_t seed, const char* path = "") {
  Lcg rng(seed);
  const std::vector<float> a = random_values(size_t(m) * k, rng), b = random_values(size_t(k) * n, rng);
  const std::vector<float> c0 = beta == 0 ? std::vector<float>(size_t(m) * n, 0.0f) : random_values(size_t(m) * n, rng);
  GemmArgs g;
  g.m = m; g.n = n; g.k = k; g.trans_a = ta; g.trans_b = tb;
  g.alpha = 0.75f; g.beta = beta; g.inputs = inputs;

  std::vector<float> want = c0;
  g.a = a.data(); g.b = b.data(); g.c = want.data();
  cpu.gemm(g);

  DeviceFloats da(gpu, a, offset), db(gpu, b, offset), dc(gpu, beta == 0 ? nans(c0.size()) : c0, offset);
  g.a = da.get(); g.b = db.get(); g.c = dc.get();
  gpu.gemm(g);

  char name[160];
  std::snprintf(name, sizeof name, "gemm%s %s m=%d n=%d k=%d trans_a=%d trans_b=%d beta=%g%s", path,
                inputs == GemmPrecision::bf16 ? "bf16" : "fp32", m, n, k, int(ta), int(tb), beta,
                offset ? " unaligned" : "");
  rep.check(name, relative_error(dc.download(), want), 1e-4);
}

// bf16 activations (precision.bf16_activations): RMSNorm and SwiGLU write their outputs rounded to
// bfloat16, and a GEMM takes A or B stored so. The stored bits must be the CPU's exactly (both
// round to nearest even); the GEMM, as check_gemm, within 1e-4.
void check_bf16_activations(Report& rep, const Backend& cpu, const Backend& gpu, int rows, int dim, int out,
                            uint64_t seed) {
  Lcg rng(seed);
  const std::string shape = " rows=" + std::to_string(rows) + " dim=" + std::to_string(dim);
  const std::vector<float> x = random_values(size_t(rows) * dim, rng, -2.0f, 2.0f), w = random_values(dim, rng, 0.5f, 1.5f);
  std::vector<mt::Bf16> y(x.size());
  std::vector<float> rstd(rows);
  cpu.rmsnorm_forward({.rows = rows, .dim = dim, .eps = 1e-5f, .x = x.data(), .weight = w.data(), .rstd = rstd.data(),
                       .y_bf16 = y.data()});
  DeviceFloats gx(gpu, x), gw(gpu, w), grstd(gpu, nans(rows));
  DeviceVec<mt::Bf16> gy(gpu, std::vector<mt::Bf16>(y.size(), mt::Bf16{0x7fc1}));
  gpu.rmsnorm_forward({.rows = rows, .dim = dim, .eps = 1e-5f, .x = gx.get(), .weight = gw.get(), .rstd = grstd.get(),
                       .y_bf16 = gy.get()});
  const std::vector<mt::Bf16> got = gy.download();
  size_t differ = 0;
  for (size_t i = 0; i < y.size(); ++i) differ += got[i].bits != y[i].bits;
  // A row's sum of squares differs in the last bits (the GPU sums in fp32), which can move a value
  // across a rounding boundary: a few in a million may differ by one bfloat16 ulp.
  rep.check("rmsnorm_forward bf16 output: values off by an ulp, per element" + shape, double(differ) / y.size(), 1e-4);

  const std::vector<float> gate = random_values(x.size(), rng, -6.0f, 6.0f), up = random_values(x.size(), rng);
  std::vector<mt::Bf16> h(x.size());
  cpu.swiglu_forward({.n = x.size(), .gate = gate.data(), .up = up.data(), .h_bf16 = h.data()});
  DeviceFloats ggate(gpu, gate), gup(gpu, up);
  DeviceVec<mt::Bf16> gh(gpu, std::vector<mt::Bf16>(h.size(), mt::Bf16{0x7fc1}));
  gpu.swiglu_forward({.n = x.size(), .gate = ggate.get(), .up = gup.get(), .h_bf16 = gh.get()});
  const std::vector<mt::Bf16> hgot = gh.download();
  differ = 0;
  for (size_t i = 0; i < h.size(); ++i) differ += hgot[i].bits != h[i].bits;
  rep.check("swiglu_forward bf16 output, per element" + shape, double(differ) / h.size(), 1e-4);

  // Columns copied into bfloat16 (MLA's keys and values per head): rounded, bit for bit.
  std::vector<mt::Bf16> cols(size_t(rows) * 16);
  cpu.copy_columns({.rows = rows, .cols = 16, .src = x.data() + 5, .src_stride = dim, .dst_stride = 16,
                    .dst_bf16 = cols.data()});
  DeviceVec<mt::Bf16> gcols(gpu, std::vector<mt::Bf16>(cols.size(), mt::Bf16{0x7fc1}));
  gpu.copy_columns({.rows = rows, .cols = 16, .src = gx.get() + 5, .src_stride = dim, .dst_stride = 16,
                    .dst_bf16 = gcols.get()});
  const std::vector<mt::Bf16> cgot = gcols.download();
  differ = 0;
  for (size_t i = 0; i < cols.size(); ++i) differ += cgot[i].bits != cols[i].bits;
  rep.check("copy_columns into bfloat16, elements that differ" + shape, double(differ), 0);

  // y [rows, dim] as A of a forward product (x W^T) and as B of a weight gradient (dY^T y).
  const std::vector<float> wt = random_values(size_t(out) * dim, rng), dyv = random_values(size_t(rows) * out, rng);
  DeviceFloats gwt(gpu, wt), gdy(gpu, dyv), gc(gpu, nans(size_t(rows) * out)), gdw(gpu, nans(size_t(out) * dim));
  DeviceVec<mt::Bf16> gyc(gpu, y);  // the CPU's bits on both sides: the check covers the GEMM alone
  std::vector<float> c(size_t(rows) * out), dwv(size_t(out) * dim);
  const mt::GemmArgs fwd{.m = rows, .n = out, .k = dim, .b = wt.data(), .trans_b = true, .c = c.data(),
                         .inputs = GemmPrecision::bf16, .a_bf16 = y.data()};
  cpu.gemm(fwd);
  mt::GemmArgs g = fwd;
  g.b = gwt.get(), g.c = gc.get(), g.a_bf16 = gyc.get();
  gpu.gemm(g);
  rep.check("gemm bf16 with A stored in bfloat16" + shape, relative_error(gc.download(), c), 1e-4);
  const mt::GemmArgs wgrad{.m = out, .n = dim, .k = rows, .a = dyv.data(), .trans_a = true, .c = dwv.data(),
                           .inputs = GemmPrecision::bf16, .b_bf16 = y.data()};
  cpu.gemm(wgrad);
  g = wgrad;
  g.a = gdy.get(), g.c = gdw.get(), g.b_bf16 = gyc.get();
  gpu.gemm(g);
  rep.check("gemm bf16 with B stored in bfloat16" + shape, relative_error(gdw.download(), dwv), 1e-4);
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
  DeviceFloats gy(gpu, nans(y.size())), grstd(gpu, nans(rstd.size()));
  gpu.rmsnorm_forward({rows, dim, 1e-5f, dx_in.get(), dw.get(), gy.get(), grstd.get()});
  rep.check("rmsnorm_forward" + shape,
            std::max(relative_error(gy.download(), y), relative_error(grstd.download(), rstd)), kTol);

  // Backward passes take the CPU's rstd on both sides, so each check covers one kernel only.
  DeviceFloats drstd(gpu, rstd);
  std::vector<float> dx(x.size());
  cpu.rmsnorm_backward_input({rows, dim, dy.data(), x.data(), w.data(), rstd.data(), dx.data()});
  DeviceFloats gdx(gpu, nans(x.size()));
  gpu.rmsnorm_backward_input({rows, dim, ddy.get(), dx_in.get(), dw.get(), drstd.get(), gdx.get()});
  rep.check("rmsnorm_backward_input" + shape, relative_error(gdx.download(), dx), kTol);

  std::vector<float> dweight = dw0;
  cpu.rmsnorm_backward_weight({rows, dim, dy.data(), x.data(), rstd.data(), dweight.data()});
  DeviceFloats gdw(gpu, dw0);
  gpu.rmsnorm_backward_weight({rows, dim, ddy.get(), dx_in.get(), drstd.get(), gdw.get()});
  const std::vector<float> first = gdw.download();
  rep.check("rmsnorm_backward_weight" + shape, relative_error(first, dweight), kTol);

  // Same inputs again must give bitwise the same gradient (no atomics, fixed order).
  DeviceFloats gdw2(gpu, dw0);
  gpu.rmsnorm_backward_weight({rows, dim, ddy.get(), dx_in.get(), drstd.get(), gdw2.get()});
  rep.check("rmsnorm_backward_weight reproducible" + shape, relative_error(gdw2.download(), first), kExact);
}

// The residual add fused into the norm (forward, in place) and around its backward.
void check_rmsnorm_residual(Report& rep, const Backend& cpu, const Backend& gpu, int rows, int dim, uint64_t seed) {
  Lcg rng(seed);
  const size_t n = size_t(rows) * dim;
  const std::vector<float> x = random_values(n, rng, -2.0f, 2.0f), res = random_values(n, rng, -2.0f, 2.0f);
  const std::vector<float> w = random_values(dim, rng, 0.5f, 1.5f);
  const std::vector<float> dy = random_values(n, rng), around = random_values(n, rng);
  const std::string shape = " rows=" + std::to_string(rows) + " dim=" + std::to_string(dim);
  std::vector<float> sum = x, y(n), rstd(rows);
  cpu.rmsnorm_forward({.rows = rows, .dim = dim, .eps = 1e-5f, .x = sum.data(), .weight = w.data(), .y = y.data(),
                       .rstd = rstd.data(), .residual = res.data(), .sum = sum.data()});
  DeviceFloats gsum(gpu, x), gres(gpu, res), gw(gpu, w), gy(gpu, nans(n)), grstd(gpu, nans(rows));
  gpu.rmsnorm_forward({.rows = rows, .dim = dim, .eps = 1e-5f, .x = gsum.get(), .weight = gw.get(), .y = gy.get(),
                       .rstd = grstd.get(), .residual = gres.get(), .sum = gsum.get()});
  rep.check("rmsnorm_forward residual sum, in place" + shape, relative_error(gsum.download(), sum), kExact);
  rep.check("rmsnorm_forward after the residual" + shape,
            std::max(relative_error(gy.download(), y), relative_error(grstd.download(), rstd)), kTol);

  std::vector<float> dx(n);
  cpu.rmsnorm_backward_input({.rows = rows, .dim = dim, .dy = dy.data(), .x = sum.data(), .weight = w.data(),
                              .rstd = rstd.data(), .dx = dx.data(), .residual_grad = around.data()});
  DeviceFloats gdy(gpu, dy), gx(gpu, sum), drstd(gpu, rstd), garound(gpu, around), gdx(gpu, nans(n));
  gpu.rmsnorm_backward_input({.rows = rows, .dim = dim, .dy = gdy.get(), .x = gx.get(), .weight = gw.get(),
                              .rstd = drstd.get(), .dx = gdx.get(), .residual_grad = garound.get()});
  rep.check("rmsnorm_backward_input with the residual's gradient" + shape, relative_error(gdx.download(), dx), kTol);
}

// More rows than 65535 chunks of the weight gradient (the grid's y limit). Products of dy, x in {-1, 0, 1}
// and rstd = 1 are integers, so every sum is exact on both sides and a lost or doubled row shows.
void check_rmsnorm_weight_many_rows(Report& rep, const Backend& cpu, const Backend& gpu, int rows, int dim,
                                    uint64_t seed) {
  Lcg rng(seed);
  std::vector<float> x(size_t(rows) * dim), dy(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = float(rng.below(3) - 1);
    dy[i] = float(rng.below(3) - 1);
  }
  const std::vector<float> rstd(rows, 1.0f);
  std::vector<float> dw0(dim);
  for (float& v : dw0) v = float(rng.below(100));
  std::vector<float> want = dw0;
  cpu.rmsnorm_backward_weight({rows, dim, dy.data(), x.data(), rstd.data(), want.data()});
  DeviceFloats gx(gpu, x), gdy(gpu, dy), grstd(gpu, rstd), gdw(gpu, dw0);
  gpu.rmsnorm_backward_weight({rows, dim, gdy.get(), gx.get(), grstd.get(), gdw.get()});
  rep.check("rmsnorm_backward_weight exact rows=" + std::to_string(rows) + " dim=" + std::to_string(dim),
            relative_error(gdw.download(), want), kExact);
}

struct RopeShape {
  int rows, heads, head_dim, rot_offset, rot_dim, seq_len;
  int first_position = 0;  // a decoder's row: position first_position + row % seq_len
};

void check_rope(Report& rep, const Backend& cpu, const Backend& gpu, const RopeShape& sh, bool inverse,
                size_t offset, uint64_t seed, const mt::RopeScaling& scaling = {}) {
  Lcg rng(seed);
  const std::vector<float> x = random_values(size_t(sh.rows) * sh.heads * sh.head_dim, rng, -2.0f, 2.0f);
  RopeArgs r{.rows = sh.rows, .heads = sh.heads, .head_dim = sh.head_dim, .rot_offset = sh.rot_offset,
             .rot_dim = sh.rot_dim, .seq_len = sh.seq_len, .first_position = sh.first_position, .theta = 10000.0f,
             .inverse = inverse, .scaling = scaling};
  std::vector<float> want = x;
  r.x = want.data();
  cpu.rope(r);
  DeviceFloats gx(gpu, x, offset);
  r.x = gx.get();
  gpu.rope(r);
  char name[160];
  std::snprintf(name, sizeof name, "rope%s%s rows=%d heads=%d head_dim=%d rot_offset=%d rot_dim=%d seq_len=%d%s%s",
                scaling.factor > 1 ? " yarn" : "", inverse ? " inverse" : "", sh.rows, sh.heads, sh.head_dim,
                sh.rot_offset, sh.rot_dim, sh.seq_len, offset ? " unaligned" : "",
                sh.first_position ? (" from position " + std::to_string(sh.first_position)).c_str() : "");
  rep.check(name, relative_error(gx.download(), want), kTol);
}

// RoPE writing a bfloat16 copy (bf16 activations: MHA's queries and keys, MLA's queries): the
// input stays, and the copy's bits are the CPU's, but where the device's double cos or sin differs
// from glibc's in the last bit and so moves the float cosine or sine by an ulp. That moves a result
// by up to |x| * 2^-24 absolute: across a rounding boundary (one bfloat16 ulp), or, for a result
// x0 * c - x1 * s near zero, by many of its ulps (the first H200 run: one element in 2M). So a value
// is right within one ulp or within the fp32 check's tolerance (kTol of the largest value).
void check_rope_bf16(Report& rep, const Backend& cpu, const Backend& gpu, const RopeShape& sh, uint64_t seed) {
  Lcg rng(seed);
  const size_t n = size_t(sh.rows) * sh.heads * sh.head_dim;
  std::vector<float> x = random_values(n, rng, -2.0f, 2.0f);
  std::vector<mt::Bf16> want(n);
  cpu.rope({.rows = sh.rows, .heads = sh.heads, .head_dim = sh.head_dim, .rot_offset = sh.rot_offset,
            .rot_dim = sh.rot_dim, .seq_len = sh.seq_len, .x = x.data(), .out_bf16 = want.data()});
  DeviceFloats gx(gpu, x);
  DeviceVec<mt::Bf16> gout(gpu, std::vector<mt::Bf16>(n, mt::Bf16{0x7fc1}));
  gpu.rope({.rows = sh.rows, .heads = sh.heads, .head_dim = sh.head_dim, .rot_offset = sh.rot_offset,
            .rot_dim = sh.rot_dim, .seq_len = sh.seq_len, .x = gx.get(), .out_bf16 = gout.get()});
  const std::vector<mt::Bf16> got = gout.download();
  double largest = 0;
  for (const mt::Bf16& w : want) largest = std::max(largest, double(std::fabs(mt::bf16_bits_to_float(w.bits))));
  size_t differ = 0, beyond_ulp = 0;
  for (size_t i = 0; i < n; ++i) {
    const float a = mt::bf16_bits_to_float(got[i].bits), b = mt::bf16_bits_to_float(want[i].bits);
    differ += got[i].bits != want[i].bits;
    beyond_ulp += !(std::fabs(a - b) <= std::max(std::fabs(double(b)) / 128, kTol * largest));
  }
  char name[160];
  std::snprintf(name, sizeof name, "rope bf16 output rows=%d heads=%d head_dim=%d rot_offset=%d rot_dim=%d",
                sh.rows, sh.heads, sh.head_dim, sh.rot_offset, sh.rot_dim);
  rep.check(std::string(name) + ": values off by an ulp, per element", double(differ) / n, 1e-3);
  rep.check(std::string(name) + ": values off by more than an ulp and the fp32 tolerance", double(beyond_ulp), kExact);
  rep.check(std::string(name) + ": input unchanged", relative_error(gx.download(), x), kExact);
}

void check_swiglu(Report& rep, const Backend& cpu, const Backend& gpu, size_t n, size_t offset, uint64_t seed) {
  Lcg rng(seed);
  const std::vector<float> g = random_values(n, rng, -6.0f, 6.0f), u = random_values(n, rng),
                           dh = random_values(n, rng);
  const std::string shape = " n=" + std::to_string(n) + (offset ? " unaligned" : "");
  DeviceFloats gg(gpu, g, offset), gu(gpu, u, offset), gdh(gpu, dh, offset);

  std::vector<float> h(n);
  cpu.swiglu_forward({n, g.data(), u.data(), h.data()});
  DeviceFloats gh(gpu, nans(n), offset);
  gpu.swiglu_forward({n, gg.get(), gu.get(), gh.get()});
  rep.check("swiglu_forward" + shape, relative_error(gh.download(), h), kTol);

  std::vector<float> dgate(n), dup(n);
  cpu.swiglu_backward({n, g.data(), u.data(), dh.data(), dgate.data(), dup.data()});
  DeviceFloats gdgate(gpu, nans(n), offset), gdup(gpu, nans(n), offset);
  gpu.swiglu_backward({n, gg.get(), gu.get(), gdh.get(), gdgate.get(), gdup.get()});
  rep.check("swiglu_backward" + shape,
            std::max(relative_error(gdgate.download(), dgate), relative_error(gdup.download(), dup)), kTol);
}

// The backend's time marks (CUDA events) through DeviceTimer: an interval around queued GEMMs measures
// more than zero and no more than the host's clock saw from before the first mark until the timer was
// read (reading waits for the device), and a second read starts over.
void check_device_timer(Report& rep, const Backend& gpu, uint64_t seed) {
  Lcg rng(seed);
  const int n = 512;
  const std::vector<float> a = random_values(size_t(n) * n, rng);
  DeviceFloats da(gpu, a), db(gpu, a), dc(gpu, nans(a.size()));
  GemmArgs g;
  g.m = g.n = g.k = n;
  g.a = da.get(); g.b = db.get(); g.c = dc.get();
  gpu.synchronize();
  DeviceTimer timer(gpu);
  const auto t0 = std::chrono::steady_clock::now();
  timer.time([&] {
    for (int i = 0; i < 4; ++i) gpu.gemm(g);
  });
  const double measured = timer.take_seconds();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rep.check("device timer: 4 gemms n=512 take time (" + std::to_string(measured * 1e6) + " us)", measured > 0 ? 0 : 1, 0.5);
  rep.check("device timer: within the host's window (" + std::to_string(wall * 1e6) + " us)", measured <= wall ? 0 : 1, 0.5);
  rep.check("device timer: read again, it starts over", timer.take_seconds() == 0 ? 0 : 1, 0.5);
}

void check_add(Report& rep, const Backend& cpu, const Backend& gpu, size_t n, size_t offset, uint64_t seed) {
  Lcg rng(seed);
  const std::vector<float> x = random_values(n, rng), y0 = random_values(n, rng);
  std::vector<float> want = y0;
  cpu.add({n, x.data(), want.data()});
  DeviceFloats gx(gpu, x, offset), gy(gpu, y0, offset);
  gpu.add({n, gx.get(), gy.get()});
  rep.check("add n=" + std::to_string(n) + (offset ? " unaligned" : ""), relative_error(gy.download(), want), kExact);
}

// The window is columns [col, col + cols) of dst. Without accumulate the window starts as NaN and the
// columns around it as random values, which must come back unchanged.
void check_copy_columns(Report& rep, const Backend& cpu, const Backend& gpu, int rows, int cols, int src_stride,
                        int dst_stride, int col, bool accumulate, uint64_t seed) {
  Lcg rng(seed);
  const std::vector<float> src = random_values(size_t(rows) * src_stride + 1, rng);  // read from src[1]
  std::vector<float> dst0 = random_values(size_t(rows) * dst_stride, rng);
  if (!accumulate)
    for (int r = 0; r < rows; ++r) std::fill_n(dst0.begin() + size_t(r) * dst_stride + col, cols, NAN);
  std::vector<float> want = dst0;
  cpu.copy_columns({rows, cols, src.data() + 1, src_stride, want.data() + col, dst_stride, accumulate});
  DeviceFloats gsrc(gpu, src), gdst(gpu, dst0);
  gpu.copy_columns({rows, cols, gsrc.get() + 1, src_stride, gdst.get() + col, dst_stride, accumulate});
  char name[160];
  std::snprintf(name, sizeof name, "copy_columns rows=%d cols=%d src_stride=%d dst_stride=%d col=%d%s", rows, cols,
                src_stride, dst_stride, col, accumulate ? " accumulate" : "");
  rep.check(name, relative_error(gdst.download(), want), kExact);
}

// About one target in eight is negative (ignored). in_place: the GPU writes dlogits over its logits.
void check_cross_entropy(Report& rep, const Backend& cpu, const Backend& gpu, int rows, int vocab, bool in_place,
                         uint64_t seed) {
  Lcg rng(seed);
  const std::vector<float> z = random_values(size_t(rows) * vocab, rng, -4.0f, 4.0f);
  std::vector<int> targets(rows);
  for (int& t : targets) t = rng.below(8) == 0 ? -1 - rng.below(100) : rng.below(vocab);
  const float scale = 0.37f;
  std::vector<float> losses(rows), dz(z.size());
  std::vector<double> total_sum{0.0};
  cpu.cross_entropy({rows, vocab, scale, z.data(), targets.data(), losses.data(), dz.data(), total_sum.data(), 1.0});
  const double total = total_sum[0];

  DeviceFloats gz(gpu, z, 1), glosses(gpu, nans(rows)), gdz(gpu, nans(in_place ? 0 : z.size()), 1);
  DeviceInts gtargets(gpu, targets, 1);
  float* gpu_dz = in_place ? gz.get() : gdz.get();
  DeviceVec<double> gtotal_sum(gpu, std::vector<double>{0.0});
  gpu.cross_entropy({rows, vocab, scale, gz.get(), gtargets.get(), glosses.get(), gpu_dz, gtotal_sum.get(), 1.0});
  const double gtotal = gtotal_sum.download()[0];
  const std::string shape = " rows=" + std::to_string(rows) + " vocab=" + std::to_string(vocab) +
                            (in_place ? " in place" : "");
  rep.check("cross_entropy losses" + shape, relative_error(glosses.download(), losses), kTol);
  rep.check("cross_entropy dlogits" + shape, relative_error(in_place ? gz.download() : gdz.download(), dz), kTol);
  rep.check("cross_entropy total" + shape, relative_error(gtotal, total), kTol);
}

void check_embedding(Report& rep, const Backend& cpu, const Backend& gpu, int rows, int vocab, int dim,
                     size_t offset, uint64_t seed) {
  Lcg rng(seed);
  std::vector<int> tokens(rows);
  for (int& t : tokens) t = rng.below(vocab);
  const std::vector<float> table = random_values(size_t(vocab) * dim, rng);
  const std::vector<float> dout = random_values(size_t(rows) * dim, rng);
  const std::vector<float> dtable0 = random_values(size_t(vocab) * dim, rng);
  char shape[120];
  std::snprintf(shape, sizeof shape, " rows=%d vocab=%d dim=%d%s", rows, vocab, dim, offset ? " unaligned" : "");
  DeviceInts gtokens(gpu, tokens, offset);

  std::vector<float> out(size_t(rows) * dim);
  cpu.embedding_forward({rows, dim, tokens.data(), table.data(), out.data()});
  DeviceFloats gtable(gpu, table, offset), gout(gpu, nans(out.size()), offset);
  gpu.embedding_forward({rows, dim, gtokens.get(), gtable.get(), gout.get()});
  rep.check(std::string("embedding_forward") + shape, relative_error(gout.download(), out), kExact);

  std::vector<float> dtable = dtable0;
  cpu.embedding_backward({rows, dim, tokens.data(), dout.data(), dtable.data()});
  DeviceFloats gdout(gpu, dout, offset), gdtable(gpu, dtable0, offset);
  gpu.embedding_backward({rows, dim, gtokens.get(), gdout.get(), gdtable.get()});
  rep.check(std::string("embedding_backward") + shape, relative_error(gdtable.download(), dtable), kExact);
}

// Attention forward (out, lse) and backward (dq, dk, dv) against the CPU reference. GPU outputs
// start as NaN, so an element a kernel fails to write fails the check. The backward runs on the
// CPU's out and lse on both sides, so each check covers one direction. fp32: the GPU sums in
// another order than BLAS (tiles of 32 keys, online rescaling), which moves results by a few ulps
// of the largest element, well inside 1e-5. bf16 (tensor cores for the head dims src/ops/attention/cuda_tc.cu
// is built for, else CUDA cores with the same rounding): both sides round the same inputs, but a
// product's inputs that differ by an ulp of fp32 (another summation order) can round to
// neighbouring bfloat16 values, and forward rounds the probabilities before their normalisation
// on the GPU and after it on the CPU; that leaves differences of bfloat16's 2^-8, so 1e-2.
// A decoder's attention of one position over its cache (fp32 both sides: summation order only).
void check_attention_decode(Report& rep, const Backend& cpu, const Backend& gpu, int length, int heads, int kv_heads,
                            int qk_dim, int v_dim, uint64_t seed) {
  Lcg rng(seed);
  const std::vector<float> q = random_values(size_t(heads) * qk_dim, rng);
  const std::vector<float> k = random_values(size_t(length) * kv_heads * qk_dim, rng);
  const std::vector<float> v = random_values(size_t(length) * kv_heads * v_dim, rng);
  const float scale = 1.0f / std::sqrt(float(qk_dim));
  std::vector<float> scores(size_t(heads) * length), out(size_t(heads) * v_dim);
  cpu.attention_decode({.length = length, .heads = heads, .kv_heads = kv_heads, .qk_dim = qk_dim, .v_dim = v_dim,
                        .scale = scale, .q = q.data(), .k = k.data(), .v = v.data(), .scores = scores.data(),
                        .out = out.data()});
  DeviceFloats gq(gpu, q), gk(gpu, k), gv(gpu, v), gscores(gpu, scores);
  DeviceFloats gout(gpu, std::vector<float>(out.size(), NAN));
  gpu.attention_decode({.length = length, .heads = heads, .kv_heads = kv_heads, .qk_dim = qk_dim, .v_dim = v_dim,
                        .scale = scale, .q = gq.get(), .k = gk.get(), .v = gv.get(), .scores = gscores.get(),
                        .out = gout.get()});
  char name[160];
  std::snprintf(name, sizeof name, "attention_decode length=%d heads=%d kv_heads=%d qk=%d v=%d", length, heads,
                kv_heads, qk_dim, v_dim);
  rep.check(name, relative_error(gout.download(), out), kTol);
}

void check_attention(Report& rep, const Backend& cpu, const Backend& gpu, int batch, int seq, int heads, int qk_dim,
                     int v_dim, mt::GemmPrecision inputs, uint64_t seed) {
  Lcg rng(seed);
  const size_t nq = size_t(batch) * seq * heads * qk_dim, nv = size_t(batch) * seq * heads * v_dim;
  const size_t nrow = size_t(batch) * heads * seq;
  const std::vector<float> q = random_values(nq, rng), k = random_values(nq, rng), v = random_values(nv, rng);
  const std::vector<float> dout = random_values(nv, rng);
  const float scale = 1.0f / std::sqrt(float(qk_dim));
  const bool bf16 = inputs == mt::GemmPrecision::bf16;
  const double tol = bf16 ? 1e-2 : 1e-5;
  char shape[160];
  std::snprintf(shape, sizeof shape, " batch=%d seq=%d heads=%d qk=%d v=%d%s", batch, seq, heads, qk_dim, v_dim,
                bf16 ? " bf16" : "");

  std::vector<float> out(nv), lse(nrow);
  cpu.attention_forward({.batch = batch, .seq = seq, .heads = heads, .qk_dim = qk_dim, .v_dim = v_dim,
                         .scale = scale, .q = q.data(), .k = k.data(), .v = v.data(), .out = out.data(),
                         .lse = lse.data(), .inputs = inputs});
  DeviceFloats gq(gpu, q), gk(gpu, k), gv(gpu, v), gdout(gpu, dout);
  DeviceFloats gout(gpu, std::vector<float>(nv, NAN)), glse(gpu, std::vector<float>(nrow, NAN));
  gpu.attention_forward({.batch = batch, .seq = seq, .heads = heads, .qk_dim = qk_dim, .v_dim = v_dim,
                         .scale = scale, .q = gq.get(), .k = gk.get(), .v = gv.get(), .out = gout.get(),
                         .lse = glse.get(), .inputs = inputs});
  rep.check(std::string("attention_forward out") + shape, relative_error(gout.download(), out), tol);
  rep.check(std::string("attention_forward lse") + shape, relative_error(glse.download(), lse), tol);

  std::vector<float> dq(nq), dk(nq), dv(nv);
  cpu.attention_backward({.batch = batch, .seq = seq, .heads = heads, .qk_dim = qk_dim, .v_dim = v_dim,
                          .scale = scale, .q = q.data(), .k = k.data(), .v = v.data(), .out = out.data(),
                          .lse = lse.data(), .dout = dout.data(), .dq = dq.data(), .dk = dk.data(), .dv = dv.data(),
                          .inputs = inputs});
  DeviceFloats cpu_out(gpu, out), cpu_lse(gpu, lse);
  auto run_backward = [&](const DeviceFloats& gdq, const DeviceFloats& gdk, const DeviceFloats& gdv) {
    gpu.attention_backward({.batch = batch, .seq = seq, .heads = heads, .qk_dim = qk_dim, .v_dim = v_dim,
                            .scale = scale, .q = gq.get(), .k = gk.get(), .v = gv.get(), .out = cpu_out.get(),
                            .lse = cpu_lse.get(), .dout = gdout.get(), .dq = gdq.get(), .dk = gdk.get(),
                            .dv = gdv.get(), .inputs = inputs});
  };
  DeviceFloats gdq(gpu, std::vector<float>(nq, NAN)), gdk(gpu, std::vector<float>(nq, NAN));
  DeviceFloats gdv(gpu, std::vector<float>(nv, NAN));
  run_backward(gdq, gdk, gdv);
  const std::vector<float> first_dq = gdq.download(), first_dk = gdk.download(), first_dv = gdv.download();
  rep.check(std::string("attention_backward dq") + shape, relative_error(first_dq, dq), tol);
  rep.check(std::string("attention_backward dk") + shape, relative_error(first_dk, dk), tol);
  rep.check(std::string("attention_backward dv") + shape, relative_error(first_dv, dv), tol);

  if (bf16) {
    // Queries, keys and values kept in bfloat16 (bf16 activations): the same products.
    std::vector<mt::Bf16> q16(nq), k16(nq), v16(nv);
    for (size_t i = 0; i < nq; ++i) q16[i].bits = mt::float_to_bf16_bits(q[i]);
    for (size_t i = 0; i < nq; ++i) k16[i].bits = mt::float_to_bf16_bits(k[i]);
    for (size_t i = 0; i < nv; ++i) v16[i].bits = mt::float_to_bf16_bits(v[i]);
    DeviceVec<mt::Bf16> gq16(gpu, q16), gk16(gpu, k16), gv16(gpu, v16);
    DeviceFloats gout16(gpu, std::vector<float>(nv, NAN)), glse16(gpu, std::vector<float>(nrow, NAN));
    gpu.attention_forward({.batch = batch, .seq = seq, .heads = heads, .qk_dim = qk_dim, .v_dim = v_dim,
                           .scale = scale, .out = gout16.get(), .lse = glse16.get(), .inputs = inputs,
                           .q_bf16 = gq16.get(), .k_bf16 = gk16.get(), .v_bf16 = gv16.get()});
    rep.check(std::string("attention_forward, q, k and v stored in bfloat16") + shape,
              std::max(relative_error(gout16.download(), out), relative_error(glse16.download(), lse)), tol);
    DeviceFloats gdq16(gpu, std::vector<float>(nq, NAN)), gdk16(gpu, std::vector<float>(nq, NAN));
    DeviceFloats gdv16(gpu, std::vector<float>(nv, NAN));
    gpu.attention_backward({.batch = batch, .seq = seq, .heads = heads, .qk_dim = qk_dim, .v_dim = v_dim,
                            .scale = scale, .out = cpu_out.get(), .lse = cpu_lse.get(), .dout = gdout.get(),
                            .dq = gdq16.get(), .dk = gdk16.get(), .dv = gdv16.get(), .inputs = inputs,
                            .q_bf16 = gq16.get(), .k_bf16 = gk16.get(), .v_bf16 = gv16.get()});
    rep.check(std::string("attention_backward, q, k and v stored in bfloat16") + shape,
              std::max({relative_error(gdq16.download(), dq), relative_error(gdk16.download(), dk),
                        relative_error(gdv16.download(), dv)}), tol);
  }

  // Same inputs again must give bitwise the same gradients (no atomics, fixed order).
  DeviceFloats gdq2(gpu, std::vector<float>(nq, NAN)), gdk2(gpu, std::vector<float>(nq, NAN));
  DeviceFloats gdv2(gpu, std::vector<float>(nv, NAN));
  run_backward(gdq2, gdk2, gdv2);
  const double diff = std::max({max_abs_diff(first_dq, gdq2.download()), max_abs_diff(first_dk, gdk2.download()),
                                max_abs_diff(first_dv, gdv2.download())});
  rep.check(std::string("attention_backward reproducible") + shape, diff, 0);
}

// The groups of this file; each starts from its own seed (gpu_parity's main).

// Every transpose, both precisions, beta 0 and not, over odd and round shapes, on `gpu`;
// returns how many GEMMs ran there.
long long gemm_checks(const parity::Context& c, const Backend& gpu, uint64_t seed, const char* path = "") {
  const int shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {64, 48, 80}, {257, 129, 65}, {512, 512, 512}};
  long long calls = 0;
  for (GemmPrecision inputs : {GemmPrecision::bf16, GemmPrecision::fp32}) {
    for (const auto& s : shapes)
      for (int t = 0; t < 4; ++t)
        for (float beta : {-0.5f, 0.0f}) {
          check_gemm(c.rep, c.cpu, gpu, s[0], s[1], s[2], t & 1, t & 2, inputs, beta, 0, seed++, path);
          ++calls;
        }
    // Sub-views of an allocation are only 4-byte aligned; cuBLASLt must be told so.
    for (int t = 0; t < 4; ++t, ++calls)
      check_gemm(c.rep, c.cpu, gpu, 257, 129, 65, t & 1, t & 2, inputs, -0.5f, 1, seed++, path);
  }
  return calls;
}

void group_gemm(const parity::Context& c, uint64_t seed) { gemm_checks(c, c.gpu, seed); }

// The path a GEMM takes when cuBLASLt's heuristic finds no algorithm (cublasGemmEx), forced for every
// GEMM of a second CUDA backend, on group_gemm's products; each call must be counted as a fallback.
void group_gemm_fallback(const parity::Context& c, uint64_t seed) {
  if (!c.cuda) {
    gemm_checks(c, c.gpu, seed);
    c.rep.skip("gemm fallback: every forced call counted", "the CPU backends have no fallback to count");
    return;
  }
  Backend forced = cuda_backend_create(0, {.force_gemm_fallback = true});
  const long long calls = gemm_checks(c, forced, seed, " through cublasGemmEx (forced)");
  const long long counted = backend_fallbacks(forced).calls(FallbackKind::gemm);
  c.rep.check("gemm fallback: every forced call counted (" + std::to_string(counted) + " of " +
                  std::to_string(calls) + ")",
              double(std::llabs(counted - calls)), 0);
  cuda_backend_destroy(forced);
}

void group_bf16_activations(const parity::Context& c, uint64_t seed) {
  check_bf16_activations(c.rep, c.cpu, c.gpu, 300, 768, 100, seed);
}

void group_rmsnorm(const parity::Context& c, uint64_t seed) {
  // dim >= 2: with one feature, backward_input's dx is the difference of two nearly equal terms (ill-conditioned).
  const int shapes[][2] = {{1, 2}, {3, 7}, {64, 256}, {257, 1000}, {1000, 300}, {16, 7168}, {70001, 3}};
  for (const auto& s : shapes) check_rmsnorm(c.rep, c.cpu, c.gpu, s[0], s[1], seed++);
  for (const auto& s : shapes) check_rmsnorm_residual(c.rep, c.cpu, c.gpu, s[0], s[1], seed++);
  check_rmsnorm_weight_many_rows(c.rep, c.cpu, c.gpu, 4200001, 3, seed++);
}

void group_rope(const parity::Context& c, uint64_t seed) {
  // rows, heads, head_dim, rot_offset, rot_dim, seq_len: partial and full rotation, MLA's query and shared key.
  const RopeShape shapes[] = {{2, 1, 2, 0, 2, 2},      {7, 3, 10, 4, 6, 5},      {129, 4, 32, 0, 32, 64},
                              {300, 5, 24, 16, 8, 37}, {50, 1, 576, 512, 64, 7}, {70001, 2, 6, 2, 4, 4096}};
  for (const RopeShape& sh : shapes)
    for (bool inverse : {false, true}) check_rope(c.rep, c.cpu, c.gpu, sh, inverse, 0, seed++);
  check_rope(c.rep, c.cpu, c.gpu, {33, 3, 40, 8, 32, 11}, false, 1, seed++);
  // A decoder's row after its cache (MHA's keys; MLA's shared key), and with YaRN below.
  check_rope(c.rep, c.cpu, c.gpu, {1, 8, 64, 0, 64, 1, 4000}, false, 0, seed++);
  check_rope(c.rep, c.cpu, c.gpu, {1, 1, 576, 512, 64, 1, 777}, false, 0, seed++);
  // YaRN (DeepSeek-V3's context extension) at 4x an original context of 128.
  const mt::RopeScaling yarn{.factor = 4, .original_seq_len = 128, .beta_fast = 32, .beta_slow = 1, .magnitude = 1.2f};
  for (bool inverse : {false, true})
    check_rope(c.rep, c.cpu, c.gpu, {1024, 4, 192, 128, 64, 512}, inverse, 0, seed++, yarn);
  check_rope(c.rep, c.cpu, c.gpu, {1, 16, 192, 128, 64, 1, 500}, false, 0, seed++, yarn);
  check_rope_bf16(c.rep, c.cpu, c.gpu, {4096, 8, 64, 0, 64, 1024}, seed++);    // MHA's queries
  check_rope_bf16(c.rep, c.cpu, c.gpu, {1024, 16, 192, 128, 64, 512}, seed++);  // MLA's: [nope; rope]
  check_rope_bf16(c.rep, c.cpu, c.gpu, {33, 3, 40, 8, 31, 11}, seed++);         // an odd rot_dim: last feature copied
}

void group_elementwise(const parity::Context& c, uint64_t seed) {
  for (size_t n : {size_t(1), size_t(1000), size_t(1000003)}) check_swiglu(c.rep, c.cpu, c.gpu, n, 0, seed++);
  check_swiglu(c.rep, c.cpu, c.gpu, 4099, 1, seed++);
  for (size_t n : {size_t(1), size_t(1000003)}) check_add(c.rep, c.cpu, c.gpu, n, 0, seed++);
  check_add(c.rep, c.cpu, c.gpu, 4099, 1, seed++);
  for (bool accumulate : {false, true}) {
    check_copy_columns(c.rep, c.cpu, c.gpu, 1, 1, 1, 1, 0, accumulate, seed++);
    check_copy_columns(c.rep, c.cpu, c.gpu, 37, 5, 9, 13, 3, accumulate, seed++);
    check_copy_columns(c.rep, c.cpu, c.gpu, 70001, 3, 7, 4, 1, accumulate, seed++);
    check_copy_columns(c.rep, c.cpu, c.gpu, 129, 300, 301, 600, 300, accumulate, seed++);
  }
}

void group_device_timer(const parity::Context& c, uint64_t seed) { check_device_timer(c.rep, c.gpu, seed); }

void group_cross_entropy(const parity::Context& c, uint64_t seed) {
  const int shapes[][2] = {{1, 1}, {5, 3}, {1000, 257}, {77, 5000}, {37, 129280}};
  for (const auto& s : shapes) check_cross_entropy(c.rep, c.cpu, c.gpu, s[0], s[1], false, seed++);
  check_cross_entropy(c.rep, c.cpu, c.gpu, 300, 1031, true, seed++);
}

void group_embedding(const parity::Context& c, uint64_t seed) {
  check_embedding(c.rep, c.cpu, c.gpu, 1, 1, 1, 0, seed++);
  check_embedding(c.rep, c.cpu, c.gpu, 1000, 50, 300, 0, seed++);
  check_embedding(c.rep, c.cpu, c.gpu, 333, 1000, 129, 1, seed++);
  // Many rows per token: the gradient sums hundreds of rows into each table row.
  check_embedding(c.rep, c.cpu, c.gpu, 5000, 7, 129, 0, seed++);
  check_embedding(c.rep, c.cpu, c.gpu, 70001, 3, 5, 0, seed++);
}

void group_attention(const parity::Context& c, uint64_t seed) {
  // MHA and MLA head sizes, sequences that are not tile multiples, two positions, many heads, and
  // the largest head dims the kernels promise (256 and 256).
  const int fp32_shapes[][5] = {{2, 100, 3, 64, 64}, {1, 130, 2, 192, 128}, {2, 2, 2, 16, 8},
                                {3, 33, 7, 32, 48}, {1, 70, 1, 256, 256}};
  for (const auto& s : fp32_shapes)
    check_attention(c.rep, c.cpu, c.gpu, s[0], s[1], s[2], s[3], s[4], mt::GemmPrecision::fp32, seed++);
  // bf16: each head-dim pair of the tensor-core kernels, over several 64-row tiles and a partial
  // last one, and one pair they are not built for (CUDA cores, rounding the same values).
  const int bf16_shapes[][5] = {{2, 100, 3, 64, 64}, {1, 130, 2, 192, 128}, {2, 200, 2, 128, 128},
                                {3, 65, 4, 32, 32}, {3, 33, 7, 32, 48}};
  for (const auto& s : bf16_shapes)
    check_attention(c.rep, c.cpu, c.gpu, s[0], s[1], s[2], s[3], s[4], mt::GemmPrecision::bf16, seed++);
}

void group_attention_decode(const parity::Context& c, uint64_t seed) {
  // length, heads, kv_heads, qk, v: the first position, GQA, MLA's up-projected cache, a long cache.
  const int shapes[][5] = {{1, 4, 4, 64, 64}, {37, 8, 2, 64, 64}, {300, 16, 16, 192, 128}, {5000, 2, 1, 32, 32}};
  for (const auto& s : shapes) check_attention_decode(c.rep, c.cpu, c.gpu, s[0], s[1], s[2], s[3], s[4], seed++);
}

struct Group {
  const char* name;
  void (*run)(const parity::Context&, uint64_t seed);
};

// In the order they run.
constexpr Group kGroups[] = {
    {"gemm", group_gemm},
    {"gemm_fallback", group_gemm_fallback},
    {"bf16_activations", group_bf16_activations},
    {"bf16_outputs", parity::group_bf16_outputs},
    {"rmsnorm", group_rmsnorm},
    {"rope", group_rope},
    {"elementwise", group_elementwise},
    {"device_timer", group_device_timer},
    {"cross_entropy", group_cross_entropy},
    {"embedding", group_embedding},
    {"attention", group_attention},
    {"attention_decode", group_attention_decode},
    {"attention_cudnn", parity::group_attention_cudnn},
    {"strided", parity::group_strided},
    {"routing", parity::group_routing},
    {"moe_rows", parity::group_moe_rows},
    {"grouped_gemm", parity::group_grouped_gemm},
    {"grouped_cutlass", parity::group_grouped_cutlass},
    {"optimizer", parity::group_optimizer},
    {"muon", parity::group_muon},
    {"shift_tokens", parity::group_shift_tokens},
    {"fp8_rows", parity::group_fp8_rows},
    {"fp8_fused", parity::group_fp8_fused},
    {"fp8_quantize", parity::group_fp8_quantize},
    {"fp8_gemm", parity::group_fp8_gemm},
};

// A group's first seed, from its name alone (FNV-1a): the same inputs whichever groups run.
uint64_t group_seed(const std::string& name) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return h;
}

std::string group_names() {
  std::string out;
  for (const Group& g : kGroups) out += (out.empty() ? "" : ", ") + std::string(g.name);
  return out;
}

constexpr const char* kUsage =
    "usage: gpu_parity [--cpu-stand-in] [--only GROUP[,GROUP...]] [--list]\n"
    "  --cpu-stand-in  the strict CPU backend in the GPU's place (proves the checks without a GPU)\n"
    "  --only GROUPS   run only these groups (comma-separated; --list names them)\n"
    "  --list          print the group names, one per line, and exit\n";

struct Options {
  bool stand_in = false, list = false;
  bool only = false;  // some groups named: run just those
  std::vector<bool> run = std::vector<bool>(std::size(kGroups), true);  // by kGroups index
};

// Options from the command line, or a message saying what is wrong (then exit status 2).
std::string parse_options(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--cpu-stand-in") {
      o.stand_in = true;
    } else if (arg == "--list") {
      o.list = true;
    } else if (arg == "--only" || arg.rfind("--only=", 0) == 0) {
      std::string list;
      if (arg != "--only") list = arg.substr(7);
      else if (i + 1 < argc) list = argv[++i];
      else return "--only needs a comma-separated list of groups";
      if (!o.only) o.run.assign(std::size(kGroups), false);  // several --only add up
      o.only = true;
      size_t at = 0;
      while (true) {
        const size_t comma = list.find(',', at);
        const std::string name = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        size_t g = 0;
        while (g < std::size(kGroups) && name != kGroups[g].name) ++g;
        if (g == std::size(kGroups))
          return "--only: no group named '" + name + "'; the groups are " + group_names();
        o.run[g] = true;
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
    } else {
      return "unknown argument '" + arg + "'";
    }
  }
  return "";
}

}  // namespace

// --cpu-stand-in runs every check with the strict CPU backend in the GPU's place: it proves the
// checks themselves (every output compared, device memory reached only by upload and download)
// on machines without a GPU. Output is line-buffered and each group is framed by "group NAME" and
// "group NAME: N passed, N failed", so a crash loses nothing printed and names the group it hit;
// --only reruns one group alone.
int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Options opt;
  if (const std::string problem = parse_options(argc, argv, opt); !problem.empty()) {
    std::fprintf(stderr, "gpu_parity: %s\n%s", problem.c_str(), kUsage);
    return 2;
  }
  if (opt.list) {
    for (const Group& g : kGroups) std::printf("%s\n", g.name);
    return 0;
  }
  std::string why;
  if (!opt.stand_in && !cuda_available(&why)) {
    std::printf("gpu_parity: skipped: no GPU (%s)\n", why.c_str());
    return 77;
  }
  // The own attention kernels, whose backward the attention group holds to bitwise reproducibility;
  // attention_cudnn checks cuDNN's.
  Backend gpu = opt.stand_in ? cpu_strict_backend_create() : cuda_backend_create(0, {.attention = AttentionImpl::own});
  const Backend cpu = cpu_backend();
  std::printf("gpu_parity: comparing backend '%s' against '%s'\n", gpu.ops->name, cpu.ops->name);

  Report rep;
  const parity::Context context{rep, cpu, gpu, !opt.stand_in};
  for (size_t g = 0; g < std::size(kGroups); ++g) {
    if (!opt.run[g]) continue;
    const Report before = rep;
    std::printf("group %s\n", kGroups[g].name);
    kGroups[g].run(context, group_seed(kGroups[g].name));
    std::printf("group %s: %d passed, %d failed\n", kGroups[g].name, rep.passed - before.passed,
                rep.failed - before.failed);
  }

  // What ran another way than chosen (group gemm_fallback's forced backend aside), said either way.
  const FallbackCounts fallbacks = backend_fallbacks(gpu);
  for (FallbackKind kind : kFallbackKinds) std::printf("%s\n", fallbacks.line(kind).c_str());
  if (opt.stand_in) cpu_strict_backend_destroy(gpu);
  else cuda_backend_destroy(gpu);
  std::printf("%d passed, %d failed\n", rep.passed, rep.failed);
  return rep.failed == 0 ? 0 : 1;
}
