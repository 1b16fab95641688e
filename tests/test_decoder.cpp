// The decoder (src/infer/decoder.hpp) against training's forward: fed a sequence one token at a
// time, its logits at every position are the training forward's over the whole sequence.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "infer/decoder.hpp"
#include "model/model.hpp"
#include "test_helpers.hpp"

namespace {

// The largest difference between the decoder's logits and the forward's, relative to the
// largest logit, over every position.
double decoder_error(const mt::ModelConfig& m) {
  testing::StrictDevice dev;
  mt::Model model(m, 5, dev.be, {}, 1);
  model.set_keep_logits(true);
  for (size_t i = 0; i < model.params.buffer_names.size(); ++i)  // biases that steer the routing
    model.params.set_buffer(int(i), testing::random_floats(model.params.buffer_size(int(i)), 40 + i, 0.3));
  const std::vector<int> inputs = testing::random_tokens(size_t(m.seq_len), m.vocab_size, 3);
  const std::vector<int> targets = testing::random_tokens(size_t(m.seq_len), m.vocab_size, 4);
  model.forward(0, {inputs.data(), targets.data(), 1}, {1.0f / m.seq_len, 0.0f});
  const std::vector<float> whole = model.logits_to_host(0);
  model.retire(0);

  mt::Decoder decoder(m, model.params, m.seq_len);
  double largest = 0, worst = 0;
  for (int t = 0; t < m.seq_len; ++t) {
    const std::vector<float> logits = decoder.step(inputs[size_t(t)]);
    REQUIRE(logits.size() == size_t(m.vocab_size));
    for (int v = 0; v < m.vocab_size; ++v) {
      const double want = whole[size_t(t) * m.vocab_size + v];
      largest = std::max(largest, std::abs(want));
      worst = std::max(worst, std::abs(double(logits[size_t(v)]) - want));
    }
  }
  CHECK(decoder.position() == m.seq_len);
  return worst / largest;
}

}  // namespace

TEST_CASE("the decoder's logits at every position are the training forward's: each attention kind, dense and MoE") {
  for (auto [name, m] : testing::attention_variants()) {
    m.seq_len = 12;
    CAPTURE(name);
    CHECK(decoder_error(m) < 1e-5);
  }
}

TEST_CASE("the decoder with YaRN, past the original context, and with MLA's cache") {
  for (auto [name, m] : testing::attention_variants()) {
    if (name != "mha" && name != "mla_q_lora") continue;
    m.seq_len = 12;
    m.rope_scaling.kind = mt::RopeScalingKind::yarn;
    m.rope_scaling.factor = 4;
    m.rope_scaling.original_seq_len = 4;
    m.rope_scaling.mscale = 1;
    m.rope_scaling.mscale_all_dim = 1;
    CAPTURE(name);
    CHECK(decoder_error(m) < 1e-5);
  }
}

TEST_CASE("the decoder refuses a token outside the vocabulary and a position past its cache") {
  mt::ModelConfig m = testing::tiny_model();
  testing::StrictDevice dev;
  mt::Model model(m, 5, dev.be, {}, 1);
  mt::Decoder decoder(m, model.params, 2);
  CHECK(testing::contains(testing::user_error_of([&] { decoder.step(m.vocab_size); }),
                          "token 11 is outside the model's vocabulary of 11"));
  decoder.step(1);
  decoder.step(2);
  CHECK(testing::contains(testing::user_error_of([&] { decoder.step(3); }), "holds 2 positions, all used"));
}
