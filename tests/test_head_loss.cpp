// The output head and its loss over chunks of rows (model/head_loss.hpp, model.head_chunk_tokens):
// one chunk computes exactly what the unchunked ops compute; smaller chunks give every row's loss
// and input gradient bit for bit, and the weight gradient and loss sum within a float32 rounding
// of their order. A model step with the head in chunks matches the unchunked step the same way,
// holds less activation memory, and an evaluation forward takes no gradients.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/head_loss.hpp"
#include "model/model.hpp"
#include "train/accumulate.hpp"
#include "test_helpers.hpp"

namespace {

constexpr int kRows = 40, kDim = 16, kVocab = 37;

struct HeadResult {
  std::vector<float> losses, dx, dw, logits;
  double sum = 0;
};

struct HeadInputs {
  std::vector<float> x = testing::random_floats(size_t(kRows) * kDim, 1), w = testing::random_floats(size_t(kVocab) * kDim, 2),
                     dw = testing::random_floats(size_t(kVocab) * kDim, 3, 0.1);  // gradients already summed
  std::vector<int> targets = [] {
    std::vector<int> t = testing::random_tokens(kRows, kVocab, 4);
    t[3] = t[17] = t[39] = -1;  // rows without a loss
    return t;
  }();
};

mt::LayerEnv env_of(const testing::StrictDevice& dev, mt::GemmPrecision inputs) {
  mt::LayerEnv env;
  env.backend = &dev.be;
  env.gemm_inputs = inputs;
  return env;
}

// chunk_rows < 0: the unchunked ops, as the model runs them with model.head_chunk_tokens = 0.
HeadResult run_head(const HeadInputs& in, int chunk_rows, mt::GemmPrecision precision, bool backward = true) {
  testing::StrictDevice dev;
  const mt::LayerEnv env = env_of(dev, precision);
  mt::Buffer x = dev.upload(in.x), w = dev.upload(in.w), dw = dev.upload(in.dw), losses = dev.floats(kRows),
             dx = dev.floats(size_t(kRows) * kDim), sum(dev.be, mt::DType::f64, 1), targets(dev.be, mt::DType::i32, kRows);
  targets.upload(in.targets.data(), in.targets.size());
  dev.be.zero(sum.raw(), sum.bytes());
  const float scale = 1.0f / 37;
  std::vector<float> kept;  // the logits before the loss
  if (chunk_rows < 0) {
    mt::Buffer logits = dev.floats(size_t(kRows) * kVocab);
    env.linear_forward(x.f32(), w.f32(), kRows, kDim, kVocab, logits.f32());
    kept = logits.to_host_f32();
    dev.be.cross_entropy({.rows = kRows, .vocab = kVocab, .grad_scale = scale, .logits = logits.f32(),
                          .targets = targets.i32(), .losses = losses.f32(), .dlogits = logits.f32(),
                          .sum = sum.f64(), .divisor = 3.0});
    env.linear_backward_input(logits.f32(), w.f32(), kRows, kDim, kVocab, dx.f32());
    env.linear_backward_weight(logits.f32(), x.f32(), kRows, kDim, kVocab, dw.f32());
  } else {
    mt::Buffer logits = dev.floats(size_t(kRows) * kVocab);
    mt::Arena work(dev.be);
    mt::head_loss(env, work, {.rows = kRows, .dim = kDim, .vocab = kVocab, .chunk_rows = chunk_rows, .x = x.f32(),
                              .weight = w.f32(), .targets = targets.i32(), .grad_scale = scale, .sum = sum.f64(),
                              .divisor = 3.0, .losses = losses.f32(), .dx = backward ? dx.f32() : nullptr,
                              .dweight = backward ? dw.f32() : nullptr, .logits = logits.f32()});
    kept = logits.to_host_f32();
    CHECK(work.high_water() >= size_t(std::min(kRows, chunk_rows > 0 ? chunk_rows : kRows)) * kVocab * 4);
  }
  HeadResult r{losses.to_host_f32(), backward ? dx.to_host_f32() : std::vector<float>{}, dw.to_host_f32(), kept};
  r.sum = sum.to_host_f64()[0];
  return r;
}

float largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float most = 0;
  for (size_t i = 0; i < a.size(); ++i) most = std::max(most, std::fabs(a[i] - b[i]));
  return most;
}

}  // namespace

TEST_CASE("head_loss: one chunk is the unchunked ops bit for bit, smaller chunks within float32 rounding") {
  const HeadInputs in;
  for (mt::GemmPrecision precision : {mt::GemmPrecision::fp32, mt::GemmPrecision::bf16}) {
    CAPTURE(int(precision));
    const HeadResult whole = run_head(in, -1, precision);
    CHECK(whole.sum > 0);
    for (int chunk : {0, kRows, 64}) {
      CAPTURE(chunk);
      const HeadResult one = run_head(in, chunk, precision);
      CHECK(one.logits == whole.logits);
      CHECK(one.losses == whole.losses);
      CHECK(one.dx == whole.dx);
      CHECK(one.dw == whole.dw);
      CHECK(one.sum == whole.sum);
    }
    for (int chunk : {16, 7, 1}) {  // 16, 16 and 8 rows; a short last chunk of 5; one row at a time
      CAPTURE(chunk);
      const HeadResult parts = run_head(in, chunk, precision);
      CHECK(parts.logits == whole.logits);  // each row's logits, loss and input gradient are its own
      CHECK(parts.losses == whole.losses);
      CHECK(parts.dx == whole.dx);
      // The weight gradient adds the chunks' sums in turn: values of order 0.1 to 1, a few ulp apart.
      CHECK(largest_difference(parts.dw, whole.dw) <= 1e-6f);
      CHECK(std::fabs(parts.sum - whole.sum) <= 1e-12 * whole.sum);
    }
  }
}

TEST_CASE("head_loss: without a backward it writes the losses and the sum and leaves the gradient alone") {
  const HeadInputs in;
  const HeadResult whole = run_head(in, -1, mt::GemmPrecision::fp32);
  const HeadResult forward = run_head(in, 16, mt::GemmPrecision::fp32, false);
  CHECK(forward.losses == whole.losses);
  CHECK(std::fabs(forward.sum - whole.sum) <= 1e-12 * whole.sum);
  CHECK(forward.dw == in.dw);
}

namespace {

struct Step {
  mt::StepTotals totals;
  std::vector<float> grads, head_grad;  // every gradient but the head's; the head's
  size_t activation_bytes = 0;
};

Step one_step(mt::ModelConfig cfg, int chunk_tokens) {
  cfg.head_chunk_tokens = chunk_tokens;
  testing::StrictDevice dev;
  const int batch = 4, micro_batch = 2, rows = micro_batch * cfg.seq_len;  // 2 micro-batches of 10 rows
  mt::Model model(cfg, 7, dev.be, {}, mt::slots_needed(cfg, batch, micro_batch));
  Step r;
  r.totals = mt::accumulate_gradients(model, batch, micro_batch, [&](int mb, std::vector<int>& in, std::vector<int>& tg) {
    in = testing::random_tokens(size_t(rows), cfg.vocab_size, 20 + 2 * uint64_t(mb));
    tg = testing::random_tokens(size_t(rows), cfg.vocab_size, 21 + 2 * uint64_t(mb));
  });
  r.grads = model.params.host_grads();
  const mt::ParamInfo& head = model.params.infos[size_t(model.head)];
  const auto first = r.grads.begin() + long(head.grad_offset), last = first + long(head.numel);
  r.head_grad.assign(first, last);
  r.grads.erase(first, last);
  r.activation_bytes = model.arena_high_water();
  return r;
}

mt::ModelConfig head_heavy_model() {
  mt::ModelConfig m = testing::tiny_model();
  m.vocab_size = 300;  // the logits outweigh the rest of the activations
  m.mtp.depth = 1;
  return m;
}

}  // namespace

TEST_CASE("model.head_chunk_tokens: a micro-batch in one chunk is the unchunked step bit for bit") {
  const mt::ModelConfig m = head_heavy_model();
  const Step plain = one_step(m, 0), one = one_step(m, 2 * m.seq_len);
  CHECK(one.totals.ce_sum == plain.totals.ce_sum);
  CHECK(one.totals.mtp == plain.totals.mtp);
  CHECK(one.grads == plain.grads);
  CHECK(one.head_grad == plain.head_grad);
}

TEST_CASE("model.head_chunk_tokens: smaller chunks match the unchunked step and hold less memory") {
  const mt::ModelConfig m = head_heavy_model();
  // 10 rows a micro-batch: 3, 3, 3 and 1; or all 10 at once
  const Step plain = one_step(m, 0), parts = one_step(m, 3), one = one_step(m, 10);
  CHECK(parts.totals.ce_sum == doctest::Approx(plain.totals.ce_sum).epsilon(1e-12));
  CHECK(parts.totals.mtp == doctest::Approx(plain.totals.mtp).epsilon(1e-12));
  // Only the head's weight gradient adds in another order; what flows back from it is the same.
  CHECK(parts.grads == plain.grads);
  CHECK(largest_difference(parts.head_grad, plain.head_grad) <= 1e-6f);
  // Unchunked, a micro-batch keeps its [10, 300] logits and its MTP module's until its backward;
  // chunked, one buffer of a chunk's logits in the scratch arena serves both (beside the blocks'
  // temporaries there, which bound what smaller chunks save).
  CHECK(one.activation_bytes + 10 * 300 * 4 <= plain.activation_bytes);
  CHECK(parts.activation_bytes < one.activation_bytes);
}
