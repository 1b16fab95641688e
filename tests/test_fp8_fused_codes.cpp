// FP8 codes written by the ops that produce GEMM inputs (ops/fp8/row_codes.hpp): RMSNorm's (forward
// and input gradient, the residual stream's) and SwiGLU's (forward and backward) codes and scales are
// the separate quantization's bit for bit (K ragged or not, E4M3 and E5M2, both scale rules, several
// tiles), their values are the unfused op's, a GEMM reading the codes gives the bits of one
// quantizing its input itself, and a dense FFN under FP8 then quantizes only one GEMM input itself
// (on a GPU: four launches fewer per GEMM).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "model/layer_env.hpp"
#include "model/swiglu_ffn.hpp"
#include "fp8_codes_check.hpp"

using namespace fp8_test;

TEST_CASE("fp8 fused codes: RMSNorm and its input gradient write the quantizer's codes with unchanged values") {
  for_each_case([](const mt::Fp8Recipe& r, const Shape& s) {
    for (bool residual : {false, true}) {
      CAPTURE(residual);
      testing::StrictDevice dev;
      const size_t n = size_t(s.rows) * s.cols;
      const mt::Buffer x = dev.upload(wide_floats(n, 1)), res = dev.upload(wide_floats(n, 2));
      const mt::Buffer w = dev.upload(testing::random_floats(size_t(s.cols), 3));
      const mt::Buffer sum = dev.floats(n), rstd = dev.floats(s.rows);
      check_written(dev, s, r, CodesRoom(dev, s.rows, s.cols, r), [&](float* y, const mt::Fp8RowCodes& q) {
        dev.be.rmsnorm_forward({.rows = s.rows, .dim = s.cols, .x = x.f32(), .weight = w.f32(), .y = y,
                                .rstd = rstd.f32(), .residual = residual ? res.f32() : nullptr, .sum = sum.f32(),
                                .fp8 = q});
      });
      // The input gradient (the residual stream's, with residual_grad) in the gradient format.
      const mt::Buffer dy = dev.upload(wide_floats(n, 31));
      const CodesRoom grad(dev, s.rows, s.cols, r, mt::Fp8Operand::gradient);
      check_written(dev, s, r, grad, [&](float* dx, const mt::Fp8RowCodes& q) {
        dev.be.rmsnorm_backward_input({.rows = s.rows, .dim = s.cols, .dy = dy.f32(), .x = x.f32(), .weight = w.f32(),
                                       .rstd = rstd.f32(), .dx = dx, .residual_grad = residual ? res.f32() : nullptr,
                                       .fp8 = q});
      });
    }
  });
}

TEST_CASE("fp8 fused codes: SwiGLU writes the codes of its product, and its backward of both gradients") {
  for_each_case([](const mt::Fp8Recipe& r, const Shape& s) {
    testing::StrictDevice dev;
    const size_t n = size_t(s.rows) * s.cols;
    const mt::Buffer gate = dev.upload(wide_floats(n, 4)), up = dev.upload(wide_floats(n, 5));
    const mt::Buffer h = dev.floats(n), h_plain = dev.floats(n);
    CodesRoom room(dev, s.rows, s.cols, r);
    dev.be.swiglu_forward({.n = n, .gate = gate.f32(), .up = up.f32(), .h = h_plain.f32()});
    dev.be.swiglu_forward({.n = n, .gate = gate.f32(), .up = up.f32(), .h = h.f32(), .cols = s.cols, .fp8 = room.q});
    check_fused(h, h_plain, s, r, room);

    const mt::Buffer dh = dev.upload(wide_floats(n, 11));
    const mt::Buffer dg = dev.floats(n), du = dev.floats(n), dg_plain = dev.floats(n), du_plain = dev.floats(n);
    CodesRoom room_g(dev, s.rows, s.cols, r, mt::Fp8Operand::gradient);
    CodesRoom room_u(dev, s.rows, s.cols, r, mt::Fp8Operand::gradient);
    mt::SwigluBackwardArgs a{.n = n, .gate = gate.f32(), .up = up.f32(), .dh = dh.f32(), .dgate = dg_plain.f32(),
                             .dup = du_plain.f32()};
    dev.be.swiglu_backward(a);
    a.dgate = dg.f32();
    a.dup = du.f32();
    a.cols = s.cols;
    a.dgate_fp8 = room_g.q;
    a.dup_fp8 = room_u.q;
    dev.be.swiglu_backward(a);
    check_fused(dg, dg_plain, s, r, room_g);
    check_fused(du, du_plain, s, r, room_u);
  });
}

TEST_CASE("fp8 fused codes: a GEMM reading its input's codes gives the bits of one quantizing the input") {
  for_each_case([](const mt::Fp8Recipe& r, const Shape& s) {
    testing::StrictDevice dev;
    const int out = 24;
    const size_t n = size_t(s.rows) * s.cols;
    const mt::Buffer gate = dev.upload(wide_floats(n, 6)), up = dev.upload(testing::random_floats(n, 7));
    const mt::Buffer h = dev.floats(n), w = dev.upload(testing::random_floats(size_t(out) * s.cols, 8));
    const mt::Buffer c_own = dev.floats(size_t(s.rows) * out), c_fused = dev.floats(size_t(s.rows) * out);
    CodesRoom room(dev, s.rows, s.cols, r);
    dev.be.swiglu_forward({.n = n, .gate = gate.f32(), .up = up.f32(), .h = h.f32(), .cols = s.cols, .fp8 = room.q});
    mt::GemmArgs g{.m = s.rows, .n = out, .k = s.cols, .a = h.f32(), .b = w.f32(), .trans_b = true,
                   .c = c_own.f32(), .inputs = mt::GemmPrecision::fp8,
                   .fp8 = {&r, mt::Fp8Operand::activation, mt::Fp8Operand::weight}};
    dev.be.gemm(g);
    g.c = c_fused.f32();
    g.fp8_a = room.operand();
    dev.be.gemm(g);
    CHECK(same_bits(c_own.to_host_f32(), c_fused.to_host_f32()));
  });
}

namespace {

struct FfnRun {
  int forward_quantized_a = 0, dgrad_quantized_a = 0;
  std::vector<float> y, dx, dgate, dup, ddown;
};

// RMSNorm then a SwiGLU FFN, forward and backward, under FP8 inputs, with fp8.fused_codes on or off.
FfnRun ffn_run(bool fused) {
  testing::StrictDevice dev;
  mt::OpTable table;
  const mt::Backend be = counting_backend(dev, table);
  mt::Fp8Recipe recipe;
  mt::LayerEnv env;
  env.backend = &be;
  env.gemm_inputs = mt::GemmPrecision::fp8;
  env.fp8 = &recipe;
  env.fp8_fused_codes = fused;
  const int rows = 6, dim = 200, hidden = 136;
  const mt::Buffer x = dev.upload(testing::random_floats(size_t(rows) * dim, 11));
  const mt::Buffer norm_w = dev.upload(testing::random_floats(dim, 12)), rstd = dev.floats(rows);
  const mt::Buffer wg = dev.upload(testing::random_floats(size_t(hidden) * dim, 13, 0.1));
  const mt::Buffer wu = dev.upload(testing::random_floats(size_t(hidden) * dim, 14, 0.1));
  const mt::Buffer wd = dev.upload(testing::random_floats(size_t(dim) * hidden, 15, 0.1));
  const mt::Buffer dy = dev.upload(testing::random_floats(size_t(rows) * dim, 16));
  const mt::Buffer y = dev.floats(size_t(rows) * dim), dx = dev.floats(size_t(rows) * dim);
  const mt::Buffer dg = dev.floats(wg.count()), du = dev.floats(wu.count()), dd = dev.floats(wd.count());
  const mt::SwigluWeights weights{wg.f32(), wu.f32(), wd.f32(), dim, hidden};
  mt::Arena arena(be);
  quantized_a() = 0;
  const mt::GemmOperand normed = env.rmsnorm_for_gemms(
      arena, {.rows = rows, .dim = dim, .x = x.f32(), .weight = norm_w.f32(), .rstd = rstd.f32()});
  mt::SwigluSaved saved;
  mt::swiglu_forward(env, arena, arena, weights, normed, rows, y.f32(), false, saved);
  FfnRun run;
  run.forward_quantized_a = quantized_a();
  quantized_a() = 0;
  mt::swiglu_backward_input(env, arena, weights, dy.f32(), dx.f32(), false, saved);
  run.dgrad_quantized_a = quantized_a();
  mt::swiglu_backward_weight(env, weights, {dg.f32(), du.f32(), dd.f32()}, saved);
  run.y = y.to_host_f32();
  run.dx = dx.to_host_f32();
  run.dgate = dg.to_host_f32();
  run.dup = du.to_host_f32();
  run.ddown = dd.to_host_f32();
  return run;
}

}  // namespace

TEST_CASE("fp8 fused codes: a dense FFN's GEMMs quantize only the FFN's output gradient, with the same results") {
  const FfnRun fused = ffn_run(true), separate = ffn_run(false);
  // gate, up and down read the codes of the norm and of SwiGLU; gate's and up's input gradients
  // read those of SwiGLU's backward (down's reads the FFN's output gradient, which no op here makes).
  CHECK(fused.forward_quantized_a == 0);
  CHECK(fused.dgrad_quantized_a == 1);
  CHECK(separate.forward_quantized_a == 3);
  CHECK(separate.dgrad_quantized_a == 3);
  CHECK(same_bits(fused.y, separate.y));
  CHECK(same_bits(fused.dx, separate.dx));
  CHECK(same_bits(fused.dgate, separate.dgate));
  CHECK(same_bits(fused.dup, separate.dup));
  CHECK(same_bits(fused.ddown, separate.ddown));
}
