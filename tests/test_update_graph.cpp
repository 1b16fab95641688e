// The optimizer's update as a graph (training.cuda_graph) on the strict CPU backend, whose graphs
// record the queued work and replay it (the passes' graphs with it): the gradient sums, clipping, AdamW, the bias update and
// the bf16 weights the GEMMs read run as it is in the first step, are captured in the second and
// replayed after, each step at its own learning rate and bias corrections (read from device
// memory, so the launches match the capture), and leave what a plain update leaves, bit for bit.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "model/model.hpp"
#include "model/step_scalars.hpp"
#include "runtime/one_rank.hpp"
#include "train/accumulate.hpp"
#include "train/adamw.hpp"
#include "train/step_plan.hpp"
#include "train/update.hpp"
#include "test_helpers.hpp"

namespace {

constexpr int kSteps = 4;

mt::Config update_config() {
  mt::Config cfg;
  cfg.model = testing::tiny_model();
  cfg.model.moe.bias_update_speed = 0.01;
  cfg.training.global_batch = 4;
  cfg.training.micro_batch = 2;
  cfg.training.grad_clip = 0.5;
  cfg.lr_schedule.warmup_steps = 3;  // the learning rate moves every step
  cfg.optimizer.weight_decay = 0.1;
  return cfg;
}

struct After {
  std::vector<float> values, m, v, biases;
  long long captures = 0, replays = 0;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// kSteps steps of the same batch; the update through `graphed`'s graph or plain.
After train(bool graphed) {
  const mt::Config cfg = update_config();
  const auto& t = cfg.training;
  const size_t tokens = size_t(t.global_batch) * cfg.model.seq_len;
  const std::vector<int> inputs = testing::random_tokens(tokens, cfg.model.vocab_size, 21);
  const std::vector<int> targets = testing::random_tokens(tokens, cfg.model.vocab_size, 22);
  const int n = t.micro_batch * cfg.model.seq_len;
  const mt::FillMicroBatch fill = [&](int mb, std::vector<int>& in, std::vector<int>& tg) {
    in.assign(inputs.begin() + mb * n, inputs.begin() + (mb + 1) * n);
    tg.assign(targets.begin() + mb * n, targets.begin() + (mb + 1) * n);
  };
  testing::StrictDevice dev;
  mt::GraphCapture graph;
  mt::Backend be = dev.be;
  if (graphed) be.graph = &graph;
  After out;
  {
    mt::Model model(cfg.model, 7, be, mt::MatmulSetup(mt::GemmPrecision::bf16),
                    mt::slots_needed(cfg.model, t.global_batch, t.micro_batch));
    const mt::OneRank one(be);
    mt::Optimizer optimizer(model, cfg.optimizer, one.groups, 0);
    mt::StepScalars scalars(model, 0, 0.0);  // the guard's place, the same every step
    mt::DeviceTimer sync_time(be);
    for (int step = 0; step < kSteps; ++step) {
      mt::accumulate_gradients(model, t.global_batch, t.micro_batch, fill);
      scalars.zero();
      const double lr = mt::queue_update(model, optimizer, cfg, {0, 10}, step, scalars, sync_time,
                                         graphed ? &graph : nullptr);
      scalars.download();
      CHECK(mt::update_record(model, optimizer, cfg, scalars, lr).applied);
    }
    out.values = model.params.host_values();
    optimizer.export_moments(out.m, out.v);
    for (mt::MoE* moe : model.moe_layers()) {
      const std::vector<float> b = model.params.host_buffer(moe->router().bias);
      out.biases.insert(out.biases.end(), b.begin(), b.end());
    }
  }
  out.captures = graph.captures();
  out.replays = graph.replays();
  return out;
}

}  // namespace

TEST_CASE("update graph: captured after a warm-up step, replayed at each step's learning rate, bit for bit") {
  const mt::Config cfg = update_config();
  CHECK(mt::learning_rate(cfg, {0, 10}, 2) != mt::learning_rate(cfg, {0, 10}, 3));
  const After plain = train(false), graphed = train(true);
  // A forward and a backward graph per micro-batch, and the update's.
  const int graphs = 2 * (cfg.training.global_batch / cfg.training.micro_batch) + 1;
  CHECK(graphed.captures == graphs);
  CHECK(graphed.replays == graphs * (kSteps - 2));
  CHECK(plain.captures == 0);
  CHECK_FALSE(plain.biases.empty());
  CHECK(same_bits(graphed.values, plain.values));
  CHECK(same_bits(graphed.m, plain.m));
  CHECK(same_bits(graphed.v, plain.v));
  CHECK(same_bits(graphed.biases, plain.biases));
}

TEST_CASE("update graph: AdamW's coefficients are the step's, from t = 1") {
  mt::OptimizerConfig o;
  o.beta1 = 0.9, o.beta2 = 0.95, o.weight_decay = 0.1;
  const mt::AdamwStepValues s = mt::adamw_step_values(o, 0.25, 2);
  CHECK(s.lr == 0.25);
  CHECK(s.bias_correction1 == doctest::Approx(1 - 0.81));
  CHECK(s.bias_correction2 == doctest::Approx(1 - 0.9025));
  CHECK(s.decay == double(float(0.25 * 0.1)));
}
