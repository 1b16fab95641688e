// FP8 codes of the attention output, written by the attention op (ops/fp8/row_codes.hpp): the codes
// and scales are the separate quantization's bit for bit (E4M3 or E5M2, K ragged or not). With the
// residual stream's gradient's, written by RMSNorm's input gradient (test_fp8_fused_codes.cpp), a
// block then quantizes no forward GEMM input, nor the output gradients read by the down and output
// projections' Dgrad, with the same outputs and gradients as with the GEMMs quantizing them.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "fp8_codes_check.hpp"
#include "model/block.hpp"
#include "ops/attention/args.hpp"

using namespace fp8_test;

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
      const mt::Buffer lse = dev.floats(size_t(rows) * h.heads);
      const Shape s{rows, h.heads * h.v_dim};
      check_written(dev, s, r, CodesRoom(dev, s.rows, s.cols, r), [&](float* out, const mt::Fp8RowCodes& codes) {
        dev.be.attention_forward({.batch = batch, .seq = seq, .heads = h.heads, .qk_dim = h.qk_dim, .v_dim = h.v_dim,
                                  .scale = 0.3f, .q = q.f32(), .k = k.f32(), .v = v.f32(), .out = out, .lse = lse.f32(),
                                  .inputs = mt::GemmPrecision::fp8, .kv_heads = h.kv_heads, .out_fp8 = codes});
      });
    }
}

namespace {

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
  mt::OpTable table;
  const mt::Backend be = counting_backend(dev, table);
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
  quantized_a() = 0;
  block.forward(0, arena, arena, arena, x.f32(), batch, y.f32(), 1.0f, nullptr);
  run.forward_quantized_a = quantized_a();
  CodesRoom dy_room(dev, rows, D, recipe, mt::Fp8Operand::gradient), dx_room(dev, rows, D, recipe,
                                                                             mt::Fp8Operand::gradient);
  be.rmsnorm_backward_input({.rows = rows, .dim = D, .dy = g.f32(), .x = x.f32(), .weight = norm_w.f32(),
                             .rstd = rstd.f32(), .dx = dy.f32(), .residual_grad = top.f32(),
                             .fp8 = fused ? dy_room.q : mt::Fp8RowCodes{}});
  quantized_a() = 0;
  block.backward_input(0, arena, dy.f32(), dx.f32(), fused ? dy_room.q : mt::Fp8RowCodes{},
                       fused ? dx_room.q : mt::Fp8RowCodes{});
  run.dgrad_quantized_a = quantized_a();
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
