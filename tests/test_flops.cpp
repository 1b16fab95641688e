// Parameter and FLOP counts: against the parameters a built model really holds, and against
// DeepSeek-V3's published figures.
#include <doctest/doctest.h>

#include "config/config.hpp"
#include "model/model.hpp"
#include "test_helpers.hpp"
#include "model/flops.hpp"

#include <algorithm>
#include <vector>

TEST_CASE("total_params equals the parameters a built model holds, for every attention kind") {
  const mt::Backend be = mt::cpu_backend();
  for (auto& [name, cfg] : testing::attention_variants()) {
    for (int depth : {0, 2}) {
      CAPTURE(name);
      CAPTURE(depth);
      mt::ModelConfig m = cfg;
      m.mtp.depth = depth;
      mt::Model model(m, 1, be, mt::GemmPrecision::fp32, 1);
      CHECK(mt::total_params(m) == double(model.params.total()));
    }
  }
}

TEST_CASE("DeepSeek-V3: 671B parameters, about 37B activated, 249.8 GFLOP per token at 4K context") {
  const mt::ModelConfig with_mtp = mt::load_config("configs/deepseek-v3.toml").model;
  REQUIRE(with_mtp.mtp.depth == 1);
  mt::ModelConfig m = with_mtp;  // the published main-model figures exclude the MTP module
  m.mtp.depth = 0;
  // Report: 671B total, 37B activated (README_WEIGHTS: 36.7B main model incl. 0.9B embedding
  // + 0.9B head; costmodel.md 2.2 derives 37.44B with the embedding).
  CHECK(mt::total_params(m) == doctest::Approx(671.0e9).epsilon(0.001));
  const double embedding = double(m.vocab_size) * m.d_model;
  CHECK(mt::active_matmul_params(m) + embedding == doctest::Approx(37.44e9).epsilon(0.01));
  // MLA attention has 187.1M parameters per layer (costmodel.md 2.2).
  CHECK(mt::attention_matmul_params(m) == doctest::Approx(187.1e6).epsilon(0.001));
  // Megatron-Core accounting, causal attention, no MTP: 249.8 GFLOP per token at seq 4096.
  CHECK(m.seq_len == 4096);
  CHECK(mt::training_flops_per_token(m) == doctest::Approx(249.8e9).epsilon(0.01));
  // With the depth-1 MTP module: 260.0 GFLOP per token, and 11.5B MTP parameters (README_WEIGHTS).
  CHECK(mt::training_flops_per_token(with_mtp) == doctest::Approx(260.0e9).epsilon(0.01));
  CHECK(mt::total_params(with_mtp) - mt::total_params(m) == doctest::Approx(11.5e9).epsilon(0.02));
}

namespace {

// The lightest heaviest stage over every cut of the layers into `stages` contiguous, non-empty
// stages (the head and MTP with the last), by enumeration.
double best_heaviest(const mt::ModelConfig& m, int stages, std::vector<int>& cut, int from) {
  if (int(cut.size()) == stages) {
    cut.push_back(m.n_layers);
    const std::vector<double> f = mt::stage_forward_flops(m, cut);
    cut.pop_back();
    return *std::max_element(f.begin(), f.end());
  }
  double best = 1e300;
  const int left = stages - int(cut.size());  // stages still to start, this one included
  for (int b = from; b <= m.n_layers - left; ++b) {
    cut.push_back(b);
    best = std::min(best, best_heaviest(m, stages, cut, b + 1));
    cut.pop_back();
  }
  return best;
}

}  // namespace

TEST_CASE("pipeline_cut: contiguous stages of at least one layer, the heaviest as light as any cut's") {
  mt::ModelConfig m = testing::tiny_model();
  m.n_layers = 7;
  m.n_dense_layers = 2;  // dense and MoE layers weigh differently
  for (int depth : {0, 1})
    for (int stages = 1; stages <= m.n_layers; ++stages) {
      CAPTURE(depth);
      CAPTURE(stages);
      m.mtp.depth = depth;
      const std::vector<int> cut = mt::pipeline_cut(m, stages);
      REQUIRE(cut.size() == size_t(stages) + 1);
      CHECK(cut.front() == 0);
      CHECK(cut.back() == m.n_layers);
      for (int s = 0; s < stages; ++s) CHECK(cut[s] < cut[s + 1]);
      const std::vector<double> f = mt::stage_forward_flops(m, cut);
      double all = 0;
      for (double x : f) all += x;
      CHECK(all == doctest::Approx(mt::training_flops_per_token(m) / 3));
      std::vector<int> start{0};
      CHECK(*std::max_element(f.begin(), f.end()) == doctest::Approx(best_heaviest(m, stages, start, 1)));
    }
}
