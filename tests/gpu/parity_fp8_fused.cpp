// GPU parity of the producers that write FP8 codes with their outputs (ops/fp8/row_codes.hpp):
// RMSNorm's and SwiGLU's (forward and backward) and the attention op's codes and scales against the CUDA quantizer run on
// the same output (the CPU quantizer for the stand-in), bit for bit (an error is the number of
// codes and scales that differ, tolerance 0); their values against the same ops without codes,
// bit for bit; and the FP8 GEMM reading the codes against the one quantizing its input.
#include <cstring>

#include "ops/backend/cuda_backend.hpp"
#include "ops/fp8/quantize_cpu.hpp"
#include "parity.hpp"

namespace parity {

namespace {

struct Room {
  mt::Fp8Operand kind;
  mt::Fp8RowCodes q;
  DeviceVec<uint8_t> codes;
  DeviceVec<float> scales;
  Room(const mt::Backend& gpu, int rows, int cols, const mt::Fp8Recipe& r,
       mt::Fp8Operand operand = mt::Fp8Operand::activation)
      : kind(operand),
        codes(gpu, std::vector<uint8_t>(size_t(mt::fp8_pad(rows, mt::kFp8PadOuter)) * mt::fp8_pad(cols, mt::kFp8PadK),
                                        0x5A)),
        scales(gpu, poison<float>(size_t(rows) * mt::fp8_row_pieces(cols, r.tile))) {
    q = {codes.get(), scales.get(), mt::fp8_pad(cols, mt::kFp8PadK), mt::fp8_pad(rows, mt::kFp8PadOuter), r.tile,
         r.format(kind), r.pow2_scales};
  }
};

// What the quantizer makes of y (device memory, [rows, cols]): the CUDA one's codes and scales, or
// on the stand-in the CPU one's, in the same padded layout.
mt::CudaFp8Operand quantized(const Context& c, const float* y, int rows, int cols, const mt::Fp8Recipe& r,
                             mt::Fp8Operand kind) {
  if (c.cuda) return mt::cuda_fp8_quantize(c.gpu, y, rows, cols, false, kind, r);
  std::vector<float> host(size_t(rows) * cols);
  c.gpu.synchronize();
  c.gpu.download(host.data(), y, host.size() * sizeof(float));
  const mt::cpu::Fp8Matrix q =
      mt::cpu::fp8_quantize(host.data(), rows, cols, {1, r.tile}, r.format(kind), r.pow2_scales);
  mt::CudaFp8Operand out{rows, cols, mt::fp8_pad(rows, mt::kFp8PadOuter), mt::fp8_pad(cols, mt::kFp8PadK), 1, r.tile,
                         {}, q.scales};
  out.codes.assign(size_t(out.outer_pad) * out.k_pad, 0);
  for (int i = 0; i < rows; ++i)
    for (int k = 0; k < cols; ++k) out.codes[size_t(i) * out.k_pad + k] = q.codes[size_t(i) * cols + k];
  return out;
}

// Codes and scales that differ from the quantizer's over y.
double differing(const Context& c, const float* y, int rows, int cols, const mt::Fp8Recipe& r, const Room& room) {
  const mt::CudaFp8Operand want = quantized(c, y, rows, cols, r, room.kind);
  const std::vector<uint8_t> codes = room.codes.download();
  const std::vector<float> scales = room.scales.download();
  double wrong = codes.size() == want.codes.size() && scales.size() == want.scales.size() ? 0 : 1;
  for (size_t i = 0; i < codes.size() && wrong == 0; ++i) wrong += codes[i] != want.codes[i];
  for (size_t i = 0; i < scales.size() && scales.size() == want.scales.size(); ++i)
    wrong += std::memcmp(&scales[i], &want.scales[i], sizeof(float)) != 0;
  return wrong;
}

double bits_differ(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0 ? 0 : 1;
}

std::string name_of(const char* op, const mt::Fp8Recipe& r, int rows, int cols) {
  return std::string(op) + (r.forward == mt::Fp8Format::e5m2 ? " e5m2" : " e4m3") +
         (r.pow2_scales ? " pow2" : " fp32") + " tile=" + std::to_string(r.tile) + " " + std::to_string(rows) + "x" +
         std::to_string(cols);
}

// run(out, codes) writes a producer's output [rows, cols] (and its codes, when set) to out: once
// without codes, once with room's; the two outputs the same bits, the codes the quantizer's.
template <class Run>
void check_written(const Context& c, const char* op, const mt::Fp8Recipe& r, int rows, int cols, const Room& room,
                   Run run) {
  const size_t n = size_t(rows) * cols;
  const DeviceVec<float> out(c.gpu, poison<float>(n)), plain(c.gpu, poison<float>(n));
  run(plain.get(), mt::Fp8RowCodes{});
  run(out.get(), room.q);
  const std::string values = std::string(op) + " values", codes = std::string(op) + " codes";
  c.rep.check(name_of(values.c_str(), r, rows, cols), bits_differ(out.download(), plain.download()), 0);
  c.rep.check(name_of(codes.c_str(), r, rows, cols), differing(c, out.get(), rows, cols, r, room), 0);
}

void check_shape(const Context& c, const mt::Fp8Recipe& r, int rows, int cols, uint64_t seed) {
  Lcg rng(seed);
  const size_t n = size_t(rows) * cols;
  const DeviceVec<float> x(c.gpu, random_values(n, rng, -4.0f, 4.0f)), w(c.gpu, random_values(cols, rng));
  const DeviceVec<float> rstd(c.gpu, poison<float>(rows));
  check_written(c, "rmsnorm", r, rows, cols, Room(c.gpu, rows, cols, r), [&](float* y, const mt::Fp8RowCodes& q) {
    c.gpu.rmsnorm_forward({.rows = rows, .dim = cols, .x = x.get(), .weight = w.get(), .y = y, .rstd = rstd.get(),
                           .fp8 = q});
  });

  const DeviceVec<float> up(c.gpu, random_values(n, rng, -3.0f, 3.0f));
  const DeviceVec<float> h(c.gpu, poison<float>(n)), h_plain(c.gpu, poison<float>(n));
  Room act(c.gpu, rows, cols, r);
  c.gpu.swiglu_forward({.n = n, .gate = x.get(), .up = up.get(), .h = h_plain.get()});
  c.gpu.swiglu_forward({.n = n, .gate = x.get(), .up = up.get(), .h = h.get(), .cols = cols, .fp8 = act.q});
  c.rep.check(name_of("swiglu values", r, rows, cols), bits_differ(h.download(), h_plain.download()), 0);
  c.rep.check(name_of("swiglu codes", r, rows, cols), differing(c, h.get(), rows, cols, r, act), 0);

  const DeviceVec<float> dg(c.gpu, poison<float>(n)), du(c.gpu, poison<float>(n));
  Room grad_g(c.gpu, rows, cols, r, mt::Fp8Operand::gradient), grad_u(c.gpu, rows, cols, r, mt::Fp8Operand::gradient);
  c.gpu.swiglu_backward({.n = n, .gate = x.get(), .up = up.get(), .dh = h_plain.get(), .dgate = dg.get(),
                         .dup = du.get(), .cols = cols, .dgate_fp8 = grad_g.q, .dup_fp8 = grad_u.q});
  c.rep.check(name_of("swiglu backward dgate codes", r, rows, cols), differing(c, dg.get(), rows, cols, r, grad_g), 0);
  c.rep.check(name_of("swiglu backward dup codes", r, rows, cols), differing(c, du.get(), rows, cols, r, grad_u), 0);

  // The same codes and scales; cuBLASLt may pick another algorithm for other addresses, so the
  // sums agree to fp32 rounding rather than bit for bit.
  const int out = 136;
  const DeviceVec<float> wo(c.gpu, random_values(size_t(out) * cols, rng));
  const DeviceVec<float> own(c.gpu, poison<float>(size_t(rows) * out)), fused(c.gpu, poison<float>(size_t(rows) * out));
  mt::GemmArgs g{.m = rows, .n = out, .k = cols, .a = h.get(), .b = wo.get(), .trans_b = true, .c = own.get(),
                 .inputs = mt::GemmPrecision::fp8, .fp8 = {&r, mt::Fp8Operand::activation, mt::Fp8Operand::weight}};
  c.gpu.gemm(g);
  g.c = fused.get();
  g.fp8_a = {act.q.codes, act.q.scales, act.q.ld};
  c.gpu.gemm(g);
  c.rep.check(name_of("fp8 gemm over swiglu codes", r, rows, cols), relative_error(fused.download(), own.download()),
              1e-5);
}

// RMSNorm's input gradient (the residual stream's gradient, in the gradient format) and the
// attention op's output (the output projection's input), each written with its codes.
void check_more_producers(const Context& c, const mt::Fp8Recipe& r, int rows, int cols, uint64_t seed) {
  Lcg rng(seed);
  const size_t n = size_t(rows) * cols;
  const DeviceVec<float> dy(c.gpu, random_values(n, rng, -4.0f, 4.0f)), x(c.gpu, random_values(n, rng));
  const DeviceVec<float> w(c.gpu, random_values(cols, rng)), rstd(c.gpu, random_values(rows, rng, 0.5f, 2.0f));
  const DeviceVec<float> res(c.gpu, random_values(n, rng, -2.0f, 2.0f));
  const Room grad(c.gpu, rows, cols, r, mt::Fp8Operand::gradient);
  check_written(c, "rmsnorm backward", r, rows, cols, grad, [&](float* dx, const mt::Fp8RowCodes& q) {
    c.gpu.rmsnorm_backward_input({.rows = rows, .dim = cols, .dy = dy.get(), .x = x.get(), .weight = w.get(),
                                  .rstd = rstd.get(), .dx = dx, .residual_grad = res.get(), .fp8 = q});
  });

  // Attention over rows of `cols` values: heads of 64 values, else of a third of the row (333: 111), else one.
  const int v_dim = cols % 64 == 0 ? 64 : cols % 3 == 0 ? cols / 3 : cols;
  const int batch = 2, seq = (rows + 1) / 2, heads = cols / v_dim, t = batch * seq;
  const size_t qn = size_t(t) * heads * 64, on = size_t(t) * cols;
  const DeviceVec<float> q(c.gpu, random_values(qn, rng)), k(c.gpu, random_values(qn, rng));
  const DeviceVec<float> v(c.gpu, random_values(on, rng, -4.0f, 4.0f)), lse(c.gpu, poison<float>(size_t(t) * heads));
  check_written(c, "attention", r, t, cols, Room(c.gpu, t, cols, r), [&](float* out, const mt::Fp8RowCodes& codes) {
    c.gpu.attention_forward({.batch = batch, .seq = seq, .heads = heads, .qk_dim = 64, .v_dim = v_dim,
                             .scale = 0.125f, .q = q.get(), .k = k.get(), .v = v.get(), .out = out, .lse = lse.get(),
                             .inputs = mt::GemmPrecision::fp8, .out_fp8 = codes});
  });
}

}  // namespace

void group_fp8_fused(const Context& c, uint64_t seed) {
  const int shapes[][2] = {{256, 384}, {200, 333}, {37, 7168}, {3, 5}};
  for (int variant = 0; variant < 8; ++variant) {  // E4M3 or E5M2, pow2 or fp32 scales, tile 128 or 64
    mt::Fp8Recipe r;
    r.forward = variant & 1 ? mt::Fp8Format::e5m2 : mt::Fp8Format::e4m3;
    r.gradient = variant & 1 ? mt::Fp8Format::e4m3 : mt::Fp8Format::e5m2;  // the other one
    r.pow2_scales = (variant & 2) == 0;
    r.tile = variant & 4 ? 64 : 128;
    for (const auto& s : shapes) {
      check_shape(c, r, s[0], s[1], seed++);
      check_more_producers(c, r, s[0], s[1], seed++);
    }
  }
}

}  // namespace parity
