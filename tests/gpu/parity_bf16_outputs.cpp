// Parity of the bfloat16 data path (precision.bf16_outputs): GEMMs writing bfloat16 (cuBLASLt's bf16
// D, and cublasGemmEx's where no algorithm is found) and the routed experts' grouped GEMM writing it
// (CUTLASS's epilogue with a bfloat16 output) against the CPU's fp32 product rounded once, SwiGLU
// reading bfloat16 gate and up in both passes and a bfloat16 hidden gradient, RoPE reading bfloat16
// queries and keys, and the residual adds (RMSNorm's and the block's) reading a bfloat16 output.
#include <cstdio>
#include <string>
#include <vector>

#include "ops/bf16.hpp"
#include "ops/grouped_gemm/cuda_paths.hpp"
#include "parity.hpp"

namespace parity {

namespace {

// The values of x's rows of n at row stride ld, widened.
std::vector<float> widened(const std::vector<mt::Bf16>& x, int n, int ld) {
  std::vector<float> out;
  for (size_t i = 0; i < x.size(); ++i)
    if (int(i % size_t(ld)) < n) out.push_back(mt::bf16_bits_to_float(x[i].bits));
  return out;
}

std::vector<mt::Bf16> rounded(const std::vector<float>& x) {
  std::vector<mt::Bf16> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i].bits = mt::float_to_bf16_bits(x[i]);
  return out;
}

// C [m, n] at row stride n + 3 in bfloat16; the 3 values past each row must stay as they were. The
// GPU's sums differ from the CPU's in order, so a value near a rounding boundary may land one
// bfloat16 ulp away: within 2^-7 of the largest value.
void check_gemm_bf16_out(const Context& c, int m, int n, int k, bool tb, uint64_t seed) {
  Lcg rng(seed);
  const int ldc = n + 3;
  const std::vector<float> a = random_values(size_t(m) * k, rng), b = random_values(size_t(k) * n, rng);
  const std::vector<mt::Bf16> c0(size_t(m) * ldc, mt::Bf16{0x7fc1});
  mt::GemmArgs g{.m = m, .n = n, .k = k, .trans_b = tb, .inputs = mt::GemmPrecision::bf16, .ldc = ldc};
  std::vector<mt::Bf16> want = c0;
  g.a = a.data(), g.b = b.data(), g.c_bf16 = want.data();
  c.cpu.gemm(g);
  DeviceVec<float> ga(c.gpu, a), gb(c.gpu, b);
  DeviceVec<mt::Bf16> gc(c.gpu, c0);
  g.a = ga.get(), g.b = gb.get(), g.c_bf16 = gc.get();
  c.gpu.gemm(g);
  const std::vector<mt::Bf16> got = gc.download();
  size_t gap_written = 0;
  for (size_t i = 0; i < got.size(); ++i) gap_written += int(i % size_t(ldc)) >= n && got[i].bits != 0x7fc1;
  char name[160];
  std::snprintf(name, sizeof name, "gemm bf16 output m=%d n=%d k=%d trans_b=%d", m, n, k, int(tb));
  c.rep.check(name, relative_error(widened(got, n, ldc), widened(want, n, ldc)), 1.0 / 128);
  c.rep.check(std::string(name) + ": values written past a row's n columns", double(gap_written), 0);
}

// The experts' gate or up: x [rows, k] times each group's W_g^T [k, n] in bfloat16, ragged groups with
// empty ones, against the CPU and (on CUDA, where it must run on CUTLASS) the per-group path's
// cuBLASLt bf16 D. The rows past the routed ones (room for more) must stay as they were.
void check_grouped_bf16_out(const Context& c, int n, int k, uint64_t seed) {
  Lcg rng(seed);
  const std::vector<int> off{0, 0, 130, 130, 131, 388, 452, 752, 752};
  const int groups = int(off.size()) - 1, rows = off.back(), room = rows + 5;
  const std::vector<float> a = random_values(size_t(room) * k, rng), b = random_values(size_t(groups) * n * k, rng);
  const std::vector<mt::Bf16> c0(size_t(room) * n, mt::Bf16{0x7fc1});
  mt::GroupedGemmArgs g{.groups = groups, .ragged = mt::Ragged::rows, .m = rows, .n = n, .k = k, .trans_b = true,
                        .inputs = mt::GemmPrecision::bf16};
  std::vector<mt::Bf16> want = c0;
  g.offsets = off.data(), g.a = a.data(), g.b = b.data(), g.c_bf16 = want.data();
  c.cpu.grouped_gemm(g);
  DeviceVec<int> d_off(c.gpu, off);
  DeviceVec<float> ga(c.gpu, a), gb(c.gpu, b);
  DeviceVec<mt::Bf16> gc(c.gpu, c0);
  g.offsets = d_off.get(), g.a = ga.get(), g.b = gb.get(), g.c_bf16 = gc.get();
  const std::string name = "grouped_gemm bf16 output n=" + std::to_string(n) + " k=" + std::to_string(k);
  if (c.cuda) {
    const std::string path = mt::cuda_grouped_gemm_path(c.gpu, g);
    c.rep.check(name + " runs on cutlass-bf16 (runs on " + path + ")", path == "cutlass-bf16" ? 0 : 1, 0);
  }
  c.gpu.grouped_gemm(g);
  const std::vector<mt::Bf16> got = gc.download();
  size_t past_written = 0;
  for (size_t i = size_t(rows) * n; i < got.size(); ++i) past_written += got[i].bits != 0x7fc1;
  // The routed rows' values only: the room past them holds the NaN marker on both sides.
  const auto routed = [&](const std::vector<mt::Bf16>& x) {
    return widened(std::vector<mt::Bf16>(x.begin(), x.begin() + size_t(rows) * n), n, n);
  };
  c.rep.check(name + " against the CPU", relative_error(routed(got), routed(want)), 1.0 / 128);
  c.rep.check(name + ": values written past the routed rows", double(past_written), 0);
  if (!c.cuda) return;
  DeviceVec<mt::Bf16> loop(c.gpu, c0);
  g.c_bf16 = loop.get();
  mt::cuda_grouped_gemm_per_group(c.gpu, g);
  c.rep.check(name + " against the per-group path", relative_error(routed(got), routed(loop.download())), 1.0 / 128);
}

void check_swiglu_bf16_inputs(const Context& c, size_t n, uint64_t seed) {
  Lcg rng(seed);
  const std::vector<mt::Bf16> gate = rounded(random_values(n, rng, -6.0f, 6.0f)), up = rounded(random_values(n, rng));
  const std::vector<float> dh = random_values(n, rng);
  std::vector<float> h(n), dg(n), du(n);
  c.cpu.swiglu_forward({.n = n, .h = h.data(), .gate_bf16 = gate.data(), .up_bf16 = up.data()});
  c.cpu.swiglu_backward(
      {.n = n, .dh = dh.data(), .dgate = dg.data(), .dup = du.data(), .gate_bf16 = gate.data(), .up_bf16 = up.data()});
  DeviceVec<mt::Bf16> ggate(c.gpu, gate), gup(c.gpu, up);
  DeviceVec<float> gdh(c.gpu, dh), gh(c.gpu, poison<float>(n)), gdg(c.gpu, poison<float>(n)),
      gdu(c.gpu, poison<float>(n));
  c.gpu.swiglu_forward({.n = n, .h = gh.get(), .gate_bf16 = ggate.get(), .up_bf16 = gup.get()});
  c.gpu.swiglu_backward({.n = n, .dh = gdh.get(), .dgate = gdg.get(), .dup = gdu.get(), .gate_bf16 = ggate.get(),
                         .up_bf16 = gup.get()});
  const std::string shape = " n=" + std::to_string(n);
  c.rep.check("swiglu_forward bfloat16 inputs" + shape, relative_error(gh.download(), h), 1e-5);
  c.rep.check("swiglu_backward bfloat16 inputs, dgate" + shape, relative_error(gdg.download(), dg), 1e-5);
  c.rep.check("swiglu_backward bfloat16 inputs, dup" + shape, relative_error(gdu.download(), du), 1e-5);
}

// The rotation from bfloat16 inputs (MHA's whole heads, MLA's rotary tail; both directions). The
// device's cosines may differ from glibc's in the last bit: a value may land one bfloat16 ulp away.
void check_rope_bf16_input(const Context& c, int heads, int head_dim, int rot_offset, bool inverse, uint64_t seed) {
  Lcg rng(seed);
  const int rows = 512, seq = 128, rot = head_dim - rot_offset;
  const size_t n = size_t(rows) * heads * head_dim;
  const std::vector<mt::Bf16> x = rounded(random_values(n, rng, -2.0f, 2.0f));
  std::vector<mt::Bf16> want(n);
  mt::RopeArgs a{.rows = rows, .heads = heads, .head_dim = head_dim, .rot_offset = rot_offset, .rot_dim = rot,
                 .seq_len = seq, .inverse = inverse, .out_bf16 = want.data(), .x_bf16 = x.data()};
  c.cpu.rope(a);
  DeviceVec<mt::Bf16> gx(c.gpu, x), gout(c.gpu, std::vector<mt::Bf16>(n, mt::Bf16{0x7fc1}));
  a.out_bf16 = gout.get(), a.x_bf16 = gx.get();
  c.gpu.rope(a);
  char name[128];
  std::snprintf(name, sizeof name, "rope bfloat16 input heads=%d head_dim=%d rot_offset=%d inverse=%d", heads,
                head_dim, rot_offset, int(inverse));
  c.rep.check(name, relative_error(widened(gout.download(), head_dim, head_dim), widened(want, head_dim, head_dim)),
              1.0 / 128);
}

// RMSNorm's residual add from a bfloat16 projection output, and the block's add from one.
void check_residual_bf16(const Context& c, int rows, int dim, uint64_t seed) {
  Lcg rng(seed);
  const size_t n = size_t(rows) * dim;
  const std::vector<mt::Bf16> out = rounded(random_values(n, rng, -3.0f, 3.0f));
  const std::vector<float> residual = random_values(n, rng), w = random_values(size_t(dim), rng);
  std::vector<float> sum(n), rstd(static_cast<size_t>(rows)), y(n);
  c.cpu.rmsnorm_forward({.rows = rows, .dim = dim, .weight = w.data(), .y = y.data(), .rstd = rstd.data(),
                         .residual = residual.data(), .sum = sum.data(), .x_bf16 = out.data()});
  DeviceVec<mt::Bf16> gout(c.gpu, out);
  DeviceVec<float> gres(c.gpu, residual), gw(c.gpu, w), gsum(c.gpu, poison<float>(n)),
      grstd(c.gpu, poison<float>(size_t(rows))), gy(c.gpu, poison<float>(n));
  c.gpu.rmsnorm_forward({.rows = rows, .dim = dim, .weight = gw.get(), .y = gy.get(), .rstd = grstd.get(),
                         .residual = gres.get(), .sum = gsum.get(), .x_bf16 = gout.get()});
  const std::string shape = " rows=" + std::to_string(rows) + " dim=" + std::to_string(dim);
  c.rep.check("rmsnorm residual add from bfloat16, sum" + shape, relative_error(gsum.download(), sum), 0);
  c.rep.check("rmsnorm residual add from bfloat16, y" + shape, relative_error(gy.download(), y), 1e-5);
  std::vector<float> added(n);
  c.cpu.add({.n = n, .x = residual.data(), .y = added.data(), .y_bf16 = out.data()});
  DeviceVec<float> gadded(c.gpu, poison<float>(n));
  c.gpu.add({.n = n, .x = gres.get(), .y = gadded.get(), .y_bf16 = gout.get()});
  c.rep.check("add from bfloat16" + shape, relative_error(gadded.download(), added), 0);
}

void check_swiglu_bf16_grad(const Context& c, size_t n, uint64_t seed) {
  Lcg rng(seed);
  const std::vector<mt::Bf16> gate = rounded(random_values(n, rng, -6.0f, 6.0f)), up = rounded(random_values(n, rng));
  const std::vector<mt::Bf16> dh = rounded(random_values(n, rng));
  std::vector<float> dg(n), du(n);
  c.cpu.swiglu_backward({.n = n, .dgate = dg.data(), .dup = du.data(), .gate_bf16 = gate.data(),
                         .up_bf16 = up.data(), .dh_bf16 = dh.data()});
  DeviceVec<mt::Bf16> ggate(c.gpu, gate), gup(c.gpu, up), gdh(c.gpu, dh);
  DeviceVec<float> gdg(c.gpu, poison<float>(n)), gdu(c.gpu, poison<float>(n));
  c.gpu.swiglu_backward({.n = n, .dgate = gdg.get(), .dup = gdu.get(), .gate_bf16 = ggate.get(), .up_bf16 = gup.get(),
                         .dh_bf16 = gdh.get()});
  const std::string shape = " n=" + std::to_string(n);
  c.rep.check("swiglu_backward bfloat16 hidden gradient, dgate" + shape, relative_error(gdg.download(), dg), 1e-5);
  c.rep.check("swiglu_backward bfloat16 hidden gradient, dup" + shape, relative_error(gdu.download(), du), 1e-5);
}

}  // namespace

void group_bf16_outputs(const Context& c, uint64_t seed) {
  // The dense FFN's gate and up shapes (x W^T), a ragged one, and one with an odd n (2-byte aligned rows).
  const int shapes[][3] = {{256, 512, 128}, {100, 384, 768}, {7, 33, 65}, {64, 129, 64}};
  for (const auto& s : shapes) check_gemm_bf16_out(c, s[0], s[1], s[2], true, seed++);
  check_gemm_bf16_out(c, 50, 70, 90, false, seed++);
  // MoE-like expert widths, and a K that is no multiple of the 64-deep tile.
  check_grouped_bf16_out(c, 384, 512, seed++);
  check_grouped_bf16_out(c, 256, 208, seed++);
  check_swiglu_bf16_inputs(c, 1000, seed++);
  check_swiglu_bf16_inputs(c, 300001, seed++);
  check_swiglu_bf16_grad(c, 300001, seed++);
  check_rope_bf16_input(c, 8, 64, 0, false, seed++);
  check_rope_bf16_input(c, 8, 64, 0, true, seed++);
  check_rope_bf16_input(c, 4, 192, 128, false, seed++);
  check_rope_bf16_input(c, 4, 192, 128, true, seed++);
  check_residual_bf16(c, 300, 768, seed++);
  check_residual_bf16(c, 7, 130, seed++);
}

}  // namespace parity
