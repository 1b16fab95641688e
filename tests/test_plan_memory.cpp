// The planner's memory model for moetrain's own storage (Storage::fp32, and ::mixed) against the memory one
// training step really takes: the parameters and the high water of the activation arenas, for
// every attention kind, MTP and each recomputation. (bench/memory_check.py does the same for
// multi-rank layouts under mpirun.)
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "model/model.hpp"
#include "plan/cluster.hpp"
#include "plan/cost_model.hpp"
#include "test_helpers.hpp"
#include "train/accumulate.hpp"

namespace {

struct Measured {
  double weights = 0, activations = 0;
};

Measured one_step(const mt::ModelConfig& cfg, int batch, mt::Recompute recompute, const mt::MatmulSetup& matmul = {}) {
  testing::StrictDevice dev;
  mt::Model model(cfg, 7, dev.be, matmul, 1);
  model.set_recompute(recompute);
  const std::vector<int> tokens = testing::random_tokens(size_t(batch) * cfg.seq_len, cfg.vocab_size, 5);
  mt::accumulate_gradients(model, batch, batch, [&](int, std::vector<int>& in, std::vector<int>& tg) {
    in = tokens;
    tg = tokens;
  });
  return {4.0 * double(model.params.total() + model.params.buffers_total()), double(model.arena_high_water())};
}

// One rank without ZeRO, as one_step runs.
mt::plan::Layout one_rank(int batch, mt::Recompute recompute, mt::plan::Storage storage) {
  mt::plan::Layout l;
  l.zero = 0;
  l.micro_batch = batch;
  l.recompute = recompute;
  l.storage = storage;
  return l;
}

}  // namespace

TEST_CASE("planner memory (moetrain's FP32 storage) equals one step's parameters and activation arenas") {
  const mt::plan::Cluster cluster = mt::plan::load_cluster("configs/clusters/h100-superpod.toml");
  for (auto [name, cfg] : testing::attention_variants())
    for (int depth : {0, 1})
      for (mt::Recompute recompute : {mt::Recompute::none, mt::Recompute::selective, mt::Recompute::full}) {
        cfg.mtp.depth = depth;
        cfg.seq_len = 64;  // enough rows that the arenas' 64-byte rounding of each tensor is noise
        CAPTURE(name);
        CAPTURE(depth);
        const std::string mode = mt::name_of(recompute);
      CAPTURE(mode);
        const int batch = 2;
        const mt::plan::Layout l = one_rank(batch, recompute, mt::plan::Storage::fp32);
        REQUIRE(mt::plan::layout_problem(cfg, batch, cluster, l).empty());
        const mt::plan::Estimate e = mt::plan::estimate_step(cfg, batch, cluster, l);
        const Measured m = one_step(cfg, batch, recompute);
        CHECK(e.memory.weights == doctest::Approx(m.weights).epsilon(1e-9));
        CHECK(e.memory.grads + e.memory.optimizer == doctest::Approx(3 * m.weights).epsilon(0.01));
        // Within 2%: the arenas round each tensor up to 64 bytes.
        CHECK(e.memory.activations == doctest::Approx(m.activations).epsilon(0.02));
      }
}

// Storage::mixed: the same trainer under bf16 GEMMs with precision.bf16_activations.
TEST_CASE("planner memory (mixed storage: bf16 GEMMs, bf16 activations where only GEMMs read) equals one step's") {
  const mt::plan::Cluster cluster = mt::plan::load_cluster("configs/clusters/h100-superpod.toml");
  mt::MatmulSetup matmul(mt::GemmPrecision::bf16);
  matmul.bf16_activations = true;
  for (auto [name, cfg] : testing::attention_variants())
    for (mt::Recompute recompute : {mt::Recompute::none, mt::Recompute::selective}) {
      cfg.seq_len = 64;
      cfg.n_dense_layers = 1;  // a dense block's FFN input and product in bfloat16 too
      CAPTURE(name);
      const std::string mode = mt::name_of(recompute);
      CAPTURE(mode);
      mt::plan::Layout l = one_rank(2, recompute, mt::plan::Storage::mixed);
      const mt::plan::Estimate e = mt::plan::estimate_step(cfg, 2, cluster, l);
      const Measured m = one_step(cfg, 2, recompute, matmul);
      CHECK(e.memory.activations == doctest::Approx(m.activations).epsilon(0.02));
      // Against fp32 storage, less by the bfloat16 halves.
      l.storage = mt::plan::Storage::fp32;
      CHECK(mt::plan::estimate_step(cfg, 2, cluster, l).memory.activations > e.memory.activations);
    }
}

// fp8.fused_codes: RMSNorm and SwiGLU keep the E4M3 codes and 1 x 128 scales of what they give GEMMs
// beside the values (and SwiGLU's backward beside its gradients); the model counts them as a step does.
TEST_CASE("planner memory counts the FP8 codes fp8.fused_codes keeps beside activations, as one step holds them") {
  const mt::plan::Cluster cluster = mt::plan::load_cluster("configs/clusters/h100-superpod.toml");
  for (auto [name, cfg] : testing::attention_variants()) {
    // Widths of whole 128-value pieces, rows of whole padding: the codes as the model counts them.
    cfg.d_model = 128, cfg.ffn_hidden = 256, cfg.moe.expert_hidden = 128, cfg.seq_len = 32, cfg.vocab_size = 64;
    cfg.attention.kv_lora_rank *= 16, cfg.attention.q_lora_rank *= 16;
    CAPTURE(name);
    mt::plan::Layout l = one_rank(2, mt::Recompute::none, mt::plan::Storage::fp32);
    l.fp8 = true;
    mt::MatmulSetup matmul(mt::GemmPrecision::fp8);
    matmul.fp8_fused_codes = false;
    const double planned_without = mt::plan::estimate_step(cfg, 2, cluster, l).memory.activations;
    const double measured_without = one_step(cfg, 2, mt::Recompute::none, matmul).activations;
    matmul.fp8_fused_codes = true;
    l.fp8_code_bytes = mt::fp8_code_bytes(mt::Fp8Config{});
    const double planned_with = mt::plan::estimate_step(cfg, 2, cluster, l).memory.activations;
    const double measured_with = one_step(cfg, 2, mt::Recompute::none, matmul).activations;
    CHECK(planned_with == doctest::Approx(measured_with).epsilon(0.02));
    CHECK(planned_without == doctest::Approx(measured_without).epsilon(0.02));
    // The codes' own share, within 5% (the arenas round each allocation to 64 bytes).
    CHECK(measured_with > measured_without);
    CHECK(planned_with - planned_without == doctest::Approx(measured_with - measured_without).epsilon(0.05));
  }
}
