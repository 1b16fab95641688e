// One step path: the plan of a rank's step, the one-stage schedule a run without a pipeline
// follows, the micro-batches and slots the executor gives it, and the MoE statistics read back
// as values after the step.
#include <doctest/doctest.h>

#include <utility>
#include <vector>

#include "model/moe.hpp"
#include "train/accumulate.hpp"
#include "test_helpers.hpp"

namespace {

// The passes of a one-rank schedule: (forward?, micro-batch) each.
std::vector<std::pair<bool, int>> passes(const mt::pipeline::Schedule& s) {
  const std::vector<std::vector<mt::pipeline::ComputeOp>> order = mt::pipeline::compute_order(s);
  std::vector<std::pair<bool, int>> out;
  for (const mt::pipeline::ComputeOp& op : order.at(0))
    out.push_back({op.task.pass == mt::pipeline::Pass::forward, op.task.microbatch});
  return out;
}

}  // namespace

TEST_CASE("plan_step: a data-parallel rank's micro-batches, where their samples start, and the loss scales") {
  mt::ModelConfig m = testing::tiny_model();
  const mt::StepPlan plan = mt::plan_step(m, 16, 2, 4, 3);
  CHECK(plan.micro_batches == 2);
  CHECK(plan.first == 6);
  CHECK(plan.first_sample(7) == 14);
  CHECK(plan.scales.ce == doctest::Approx(1.0 / (16 * m.seq_len)));
  CHECK(plan.scales.aux == doctest::Approx(1.0 / 16));  // one balance group per sequence
  CHECK(plan.slots() == 1);
  m.moe.aux_loss = mt::BalanceLoss::micro_batch;
  CHECK(mt::plan_step(m, 16, 2, 4, 3).scales.aux == doctest::Approx(1.0 / 8));
  m.moe.aux_loss = mt::BalanceLoss::global_batch;
  const mt::StepPlan global = mt::plan_step(m, 16, 2, 4, 3);
  CHECK(global.scales.aux == 1.0f);
  CHECK(global.slots() == 2);  // every forward of the rank's step is kept until the backwards
}

TEST_CASE("step_schedule at pp = 1: one stage, a forward and its backward, or every forward first") {
  mt::ModelConfig m = testing::tiny_model();
  const mt::ParallelConfig one_rank;
  const mt::pipeline::Schedule alternating = mt::step_schedule(one_rank, mt::plan_step(m, 6, 2));
  CHECK_FALSE(mt::pipelined(alternating));
  using Passes = std::vector<std::pair<bool, int>>;
  CHECK(passes(alternating) == Passes{{true, 0}, {false, 0}, {true, 1}, {false, 1}, {true, 2}, {false, 2}});
  m.moe.aux_loss = mt::BalanceLoss::global_batch;
  const mt::pipeline::Schedule all_forwards = mt::step_schedule(one_rank, mt::plan_step(m, 6, 2));
  CHECK_FALSE(mt::pipelined(all_forwards));
  CHECK(passes(all_forwards) == Passes{{true, 0}, {true, 1}, {true, 2}, {false, 0}, {false, 1}, {false, 2}});
  mt::ParallelConfig dualpipev;
  dualpipev.schedule = mt::pipeline::Kind::dualpipev;
  CHECK(mt::pipelined(mt::step_schedule(dualpipev, mt::plan_step(m, 6, 2))));
}

TEST_CASE("one step without a pipeline: every micro-batch once, in order, and each layer's load as a value") {
  for (mt::BalanceLoss balance : {mt::BalanceLoss::sequence, mt::BalanceLoss::global_batch}) {
    mt::ModelConfig m = testing::tiny_model();
    m.moe.aux_loss = balance;
    const int batch = 6, micro_batch = 2, n = micro_batch * m.seq_len;
    testing::StrictDevice dev;
    mt::Model model(m, 7, dev.be, mt::GemmPrecision::fp32, mt::slots_needed(m, batch, micro_batch));
    const std::vector<int> tokens = testing::random_tokens(size_t(batch) * m.seq_len, m.vocab_size, 3);
    std::vector<int> filled;
    std::vector<std::pair<int, int>> forwards;  // micro-batch, slot
    const mt::StepTotals totals = mt::accumulate_gradients(
        model, batch, micro_batch,
        [&](int mb, std::vector<int>& in, std::vector<int>& tg) {
          filled.push_back(mb);
          in.assign(tokens.begin() + mb * n, tokens.begin() + (mb + 1) * n);
          tg = in;
        },
        [&](int mb, int slot) { forwards.push_back({mb, slot}); });
    CHECK(filled == std::vector<int>{0, 1, 2});
    const bool global = balance == mt::BalanceLoss::global_batch;
    CHECK(forwards == std::vector<std::pair<int, int>>{{0, 0}, {1, global ? 1 : 0}, {2, global ? 2 : 0}});
    CHECK(totals.ce_sum > 0);
    CHECK(totals.aux > 0);
    const std::vector<mt::MoE*> layers = model.moe_layers();
    REQUIRE(layers.size() == size_t(m.n_layers - m.n_dense_layers));
    CHECK(model.moe_layer_indices() == std::vector<int>{0, 1});
    for (mt::MoE* layer : layers) {
      double routed = 0;
      for (double tokens_to_expert : layer->router().step_load().to_host_f64()) routed += tokens_to_expert;
      CHECK(routed == double(batch) * m.seq_len * m.moe.top_k);
    }
  }
}
