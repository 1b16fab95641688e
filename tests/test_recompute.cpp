// training.recompute = "full" (every block's forward runs again before its backward) and
// "selective" (the norms' outputs, SwiGLU products and MLA's per-head q/k/v are computed again):
// the step computes exactly what it computes without recomputation, the same losses, gradients and
// expert loads, bit for bit, for every attention kind, every balance loss, MTP and FP8 GEMMs. And
// bfloat16 storage of what only GEMMs read changes nothing under bf16 GEMMs.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/model.hpp"
#include "train/accumulate.hpp"
#include "test_helpers.hpp"

namespace {

struct Result {
  mt::StepTotals totals;
  std::vector<float> grads;
  std::vector<std::vector<double>> loads;  // per MoE layer
  size_t activation_bytes = 0;             // the most the arenas held at once
};

using Mode = mt::Recompute;

Result one_step(const mt::ModelConfig& cfg, const mt::MatmulSetup& matmul, Mode recompute) {
  testing::StrictDevice dev;
  const int batch = 4, micro_batch = 2;
  mt::Model model(cfg, 7, dev.be, matmul, mt::slots_needed(cfg, batch, micro_batch));
  model.set_recompute(recompute);
  for (size_t i = 0; i < model.params.buffer_names.size(); ++i)  // biases that change the routing
    model.params.set_buffer(int(i), testing::random_floats(model.params.buffer_size(int(i)), 100 + i, 0.3));
  const std::vector<int> inputs = testing::random_tokens(size_t(batch) * cfg.seq_len, cfg.vocab_size, 11);
  const std::vector<int> targets = testing::random_tokens(size_t(batch) * cfg.seq_len, cfg.vocab_size, 12);
  const int n = micro_batch * cfg.seq_len;
  Result r;
  r.totals = mt::accumulate_gradients(model, batch, micro_batch, [&](int mb, std::vector<int>& in, std::vector<int>& tg) {
    in.assign(inputs.begin() + mb * n, inputs.begin() + (mb + 1) * n);
    tg.assign(targets.begin() + mb * n, targets.begin() + (mb + 1) * n);
  });
  r.grads = model.params.host_grads();
  for (mt::MoE* moe : model.moe_layers()) r.loads.push_back(moe->router().step_load().to_host_f64());
  r.activation_bytes = model.arena_high_water();
  return r;
}

// The same losses, gradients and expert loads, bit for bit.
void check_bitwise(const Result& got, const Result& want) {
  CHECK(got.totals.ce_sum == want.totals.ce_sum);
  CHECK(got.totals.aux == want.totals.aux);
  CHECK(got.totals.mtp == want.totals.mtp);
  REQUIRE(got.grads.size() == want.grads.size());
  size_t differ = 0;
  for (size_t i = 0; i < want.grads.size(); ++i) differ += got.grads[i] != want.grads[i];
  CHECK(differ == 0);
  CHECK(got.loads == want.loads);
}

void check_same(const std::string& name, const mt::ModelConfig& cfg, const mt::MatmulSetup& matmul = {}) {
  CAPTURE(name);
  const Result plain = one_step(cfg, matmul, Mode::none);
  for (Mode mode : {Mode::selective, Mode::full}) {
    CAPTURE(mode == Mode::full ? "full" : "selective");
    check_bitwise(one_step(cfg, matmul, mode), plain);  // the recomputed forwards count no load either
  }
}

}  // namespace

TEST_CASE("recompute: bitwise the same step for every attention kind") {
  for (const auto& [name, cfg] : testing::attention_variants()) check_same(name, cfg);
}

TEST_CASE("recompute: bitwise the same step for every balance loss, MTP and FP8") {
  const std::pair<const char*, mt::BalanceLoss> balances[] = {{"none", mt::BalanceLoss::none},
      {"sequence", mt::BalanceLoss::sequence}, {"micro_batch", mt::BalanceLoss::micro_batch},
      {"global_batch", mt::BalanceLoss::global_batch}};
  for (const auto& [name, balance] : balances) {
    mt::ModelConfig m = testing::tiny_model();
    m.moe.aux_loss = balance;
    m.moe.aux_alpha = 0.01;
    check_same(std::string("balance ") + name, m);
  }
  mt::ModelConfig mtp = testing::tiny_model();
  mtp.mtp.depth = 2;
  check_same("mtp depth 2", mtp);
  mt::ModelConfig dense = testing::tiny_model();
  dense.n_dense_layers = dense.n_layers;
  check_same("dense only", dense);
  check_same("fp8 GEMMs", testing::tiny_model(), mt::MatmulSetup(mt::GemmPrecision::fp8));
}

TEST_CASE("recompute: the slots keep less activation memory, selective between none and full") {
  mt::ModelConfig m = testing::tiny_model();
  m.n_layers = 6;
  const Result plain = one_step(m, {}, Mode::none), selective = one_step(m, {}, Mode::selective),
               full = one_step(m, {}, Mode::full);
  // Six blocks' saved tensors against their inputs and one block's work.
  CHECK(full.activation_bytes < plain.activation_bytes / 2);
  CHECK(selective.activation_bytes < plain.activation_bytes);
  CHECK(selective.activation_bytes > full.activation_bytes);
}

TEST_CASE("a full backward takes each block's weight gradients at once: bitwise the deferred ones, less memory") {
  mt::ModelConfig m = testing::tiny_model();
  m.n_layers = 6;
  m.mtp.depth = 1;
  const std::vector<int> inputs = testing::random_tokens(size_t(2) * m.seq_len, m.vocab_size, 21);
  const std::vector<int> targets = testing::random_tokens(size_t(2) * m.seq_len, m.vocab_size, 22);
  auto run = [&](bool weights_now, size_t& high_water) {
    testing::StrictDevice dev;
    mt::Model model(m, 9, dev.be, {}, 1);
    for (int mb = 0; mb < 2; ++mb) {
      const size_t at = size_t(mb) * m.seq_len;
      model.forward(0, {inputs.data() + at, targets.data() + at, 1}, {0.5f / m.seq_len, 0.5f});
      model.backward_input(0, weights_now);
      model.backward_weight(0);
      high_water = std::max(high_water, model.arena_high_water());
      model.retire(0);
    }
    return model.params.host_grads();
  };
  size_t deferred_bytes = 0, now_bytes = 0;
  const std::vector<float> deferred = run(false, deferred_bytes), now = run(true, now_bytes);
  REQUIRE(now.size() == deferred.size());
  size_t differ = 0;
  for (size_t i = 0; i < now.size(); ++i) differ += now[i] != deferred[i];
  CHECK(differ == 0);
  CHECK(now_bytes < deferred_bytes);
}

// precision.bf16_activations: with bf16 GEMM inputs, the tensors only GEMMs read (normed block
// inputs, SwiGLU products) are kept in bfloat16. The GEMMs round them so anyway: the same step,
// bit for bit, in less memory; under recomputation too.
TEST_CASE("bf16 activations: bitwise the same step as fp32 ones under bf16 GEMMs, in less memory") {
  mt::MatmulSetup fp32_kept(mt::GemmPrecision::bf16), bf16_kept(mt::GemmPrecision::bf16);
  bf16_kept.bf16_activations = true;
  for (auto [name, cfg] : testing::attention_variants()) {
    cfg.n_dense_layers = 1;  // a dense FFN block beside the MoE ones
    for (Mode mode : {Mode::none, Mode::selective, Mode::full}) {
      CAPTURE(name);
      CAPTURE(int(mode));
      const Result wide = one_step(cfg, fp32_kept, mode), narrow = one_step(cfg, bf16_kept, mode);
      check_bitwise(narrow, wide);
      CHECK(narrow.activation_bytes < wide.activation_bytes);
    }
  }
}

// precision.bf16_outputs: the FFNs' gate and up outputs are kept in bfloat16, and selective and
// full recomputation make SwiGLU's product again from them: the same step bit for bit.
TEST_CASE("bf16 outputs: recomputation gives the same step bit for bit") {
  mt::MatmulSetup matmul(mt::GemmPrecision::bf16);
  matmul.bf16_activations = matmul.bf16_outputs = true;
  for (auto [name, cfg] : testing::attention_variants()) {
    cfg.n_dense_layers = 1;
    CAPTURE(name);
    const Result plain = one_step(cfg, matmul, Mode::none);
    for (Mode mode : {Mode::selective, Mode::full}) {
      CAPTURE(int(mode));
      check_bitwise(one_step(cfg, matmul, mode), plain);
    }
  }
}
