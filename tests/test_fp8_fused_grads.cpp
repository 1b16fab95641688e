// FP8 codes of the residual stream's gradient written by its producer, RMSNorm's input gradient, and
// of the attention output, written by the attention op (ops/fp8/row_codes.hpp): the codes and scales
// are the separate quantization's bit for bit (E4M3 or E5M2, K ragged or not), and a block then
// quantizes no forward GEMM input, nor the output gradients read by the down and output
// projections' Dgrad, with the same outputs and gradients as with the GEMMs quantizing them.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "fp8_codes_check.hpp"
#include "model/block.hpp"
#include "ops/attention/args.hpp"

using namespace fp8_test;

TEST_CASE("fp8 fused codes: RMSNorm's input gradient writes the quantizer's codes with its unchanged values") {
  for_each_case([](const mt::Fp8Recipe& r, const Shape& s) {
    for (bool residual : {false, true}) {
      CAPTURE(residual);
      testing::StrictDevice dev;
      const size_t n = size_t(s.rows) * s.cols;
      const mt::Buffer dy = dev.upload(wide_floats(n, 31)), x = dev.upload(wide_floats(n, 32));
      const mt::Buffer res = dev.upload(wide_floats(n, 33)), w = dev.upload(testing::random_floats(s.cols, 34));
      const mt::Buffer rstd = dev.upload(testing::random_floats(s.rows, 35, 0.5));
      const mt::Buffer dx = dev.floats(n), dx_plain = dev.floats(n);
      CodesRoom room(dev, s.rows, s.cols, r, mt::Fp8Operand::gradient);
      mt::RmsNormBackwardInputArgs a{.rows = s.rows, .dim = s.cols, .dy = dy.f32(), .x = x.f32(), .weight = w.f32(),
                                     .rstd = rstd.f32(), .dx = dx_plain.f32(),
                                     .residual_grad = residual ? res.f32() : nullptr};
      dev.be.rmsnorm_backward_input(a);
      a.dx = dx.f32();
      a.fp8 = room.q;
      dev.be.rmsnorm_backward_input(a);
      check_fused(dx, dx_plain, s, r, room);
    }
  });
}

TEST_CASE("fp8 fused codes: the attention op writes its output's codes with its unchanged output") {
  struct Heads {
    int heads, qk_dim, v_dim, kv_heads;
  };
  // Rows of 150 (ragged against the tiles), 128 and 384 (MLA's widths: qk 192, v 128) values.
  for (const Heads& h : {Heads{3, 8, 50, 0}, Heads{2, 16, 64, 1}, Heads{3, 192, 128, 0}})
    for (const mt::Fp8Recipe& r : recipes()) {
      CAPTURE(h.v_dim);
      CAPTURE(int(r.forward));
      CAPTURE(r.tile);
      testing::StrictDevice dev;
      const int batch = 2, seq = 5, rows = batch * seq, kv = h.kv_heads ? h.kv_heads : h.heads;
      const mt::Buffer q = dev.upload(testing::random_floats(size_t(rows) * h.heads * h.qk_dim, 41));
      const mt::Buffer k = dev.upload(testing::random_floats(size_t(rows) * kv * h.qk_dim, 42));
      const mt::Buffer v = dev.upload(wide_floats(size_t(rows) * kv * h.v_dim, 43));
      const size_t n = size_t(rows) * h.heads * h.v_dim;
      const mt::Buffer out = dev.floats(n), out_plain = dev.floats(n), lse = dev.floats(size_t(rows) * h.heads);
      CodesRoom room(dev, rows, h.heads * h.v_dim, r);
      mt::AttentionForwardArgs a{.batch = batch, .seq = seq, .heads = h.heads, .qk_dim = h.qk_dim, .v_dim = h.v_dim,
                                 .scale = 0.3f, .q = q.f32(), .k = k.f32(), .v = v.f32(), .out = out_plain.f32(),
                                 .lse = lse.f32(), .inputs = mt::GemmPrecision::fp8, .kv_heads = h.kv_heads};
      dev.be.attention_forward(a);
      a.out = out.f32();
      a.out_fp8 = room.q;
      dev.be.attention_forward(a);
      check_fused(out, out_plain, {rows, h.heads * h.v_dim}, r, room);
    }
}

namespace {

// The strict CPU table with its GEMM wrapped: counts the FP8 GEMMs that quantize their A operand.
const mt::OpTable* g_inner = nullptr;
int g_quantized_a = 0;
void counting_gemm(mt::DeviceState* s, const mt::GemmArgs& g) {
  if (g.inputs == mt::GemmPrecision::fp8 && !g.fp8_a.codes) ++g_quantized_a;
  g_inner->gemm(s, g);
}

struct BlockRun {
  int forward_quantized_a = 0, dgrad_quantized_a = 0;
  std::vector<float> dx, grads;
};

// One block (index 0 dense, 1 MoE with a shared expert) forward and backward under FP8 inputs
// (E5M2 gradients), fp8.fused_codes on or off. Its output gradient comes from RMSNorm's input
// gradient with its codes, as the block above writes it; the room for the block's own input
// gradient's codes is checked against the quantizer.
BlockRun block_run(const mt::ModelConfig& cfg, int index, bool fused) {
  testing::StrictDevice dev;
  g_inner = dev.be.ops;
  mt::OpTable table = *dev.be.ops;
  table.gemm = counting_gemm;
  mt::Backend be = dev.be;
  be.ops = &table;
  mt::Fp8Recipe recipe;
  recipe.gradient = mt::Fp8Format::e5m2;
  mt::ParamStore params;
  mt::LayerEnv env{&be, mt::GemmPrecision::fp8, &params, {}, &recipe};
  env.fp8_fused_codes = fused;
  mt::Block block(env, cfg, "blocks." + std::to_string(index), index >= cfg.n_dense_layers, 1);
  params.finalize(dev.be, 9, cfg.init_std);
  const int batch = 2, rows = batch * cfg.seq_len, D = cfg.d_model;
  const size_t n = size_t(rows) * D;
  const mt::Buffer x = dev.upload(testing::random_floats(n, 21)), y = dev.floats(n), dx = dev.floats(n);
  const mt::Buffer g = dev.upload(testing::random_floats(n, 22)), top = dev.upload(testing::random_floats(n, 23));
  const mt::Buffer norm_w = dev.upload(testing::random_floats(D, 24)), dy = dev.floats(n);
  const mt::Buffer rstd = dev.upload(testing::random_floats(rows, 25, 0.5));
  mt::Arena arena(be);
  BlockRun run;
  g_quantized_a = 0;
  block.forward(0, arena, arena, arena, x.f32(), batch, y.f32(), 1.0f, nullptr);
  run.forward_quantized_a = g_quantized_a;
  CodesRoom dy_room(dev, rows, D, recipe, mt::Fp8Operand::gradient), dx_room(dev, rows, D, recipe,
                                                                             mt::Fp8Operand::gradient);
  be.rmsnorm_backward_input({.rows = rows, .dim = D, .dy = g.f32(), .x = x.f32(), .weight = norm_w.f32(),
                             .rstd = rstd.f32(), .dx = dy.f32(), .residual_grad = top.f32(),
                             .fp8 = fused ? dy_room.q : mt::Fp8RowCodes{}});
  g_quantized_a = 0;
  block.backward_input(0, arena, dy.f32(), dx.f32(), fused ? dy_room.q : mt::Fp8RowCodes{},
                       fused ? dx_room.q : mt::Fp8RowCodes{});
  run.dgrad_quantized_a = g_quantized_a;
  block.backward_weight(0);
  run.dx = dx.to_host_f32();
  run.grads = params.host_grads();
  if (fused) check_as_quantized(run.dx, rows, D, recipe, dx_room);
  return run;
}

}  // namespace

TEST_CASE("fp8 fused codes: a block's GEMMs read the attention output's and the residual gradient's codes") {
  for (const auto& [name, cfg] : testing::attention_variants())
    for (int index : {0, 1}) {
      CAPTURE(name);
      CAPTURE(index);
      const BlockRun fused = block_run(cfg, index, true), separate = block_run(cfg, index, false);
      // Four Dgrad GEMMs read codes: the down projection's (dense FFN or shared expert) and the
      // output projection's read the residual gradient's, gate's and up's SwiGLU backward's.
      CHECK(separate.dgrad_quantized_a - fused.dgrad_quantized_a == 4);
      // Forward, the output projection reads the attention op's codes: every GEMM of a dense block
      // reads codes; in a MoE block the shared expert's gate and up quantize the norm the router reads.
      CHECK(fused.forward_quantized_a == (index == 0 ? 0 : 2));
      CHECK(separate.forward_quantized_a > fused.forward_quantized_a);
      CHECK(same_bits(fused.dx, separate.dx));
      CHECK(same_bits(fused.grads, separate.grads));
    }
}
