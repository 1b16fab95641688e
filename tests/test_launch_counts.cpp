// Op launches of one attention block's forward and backward, counted through OpProfile: MLA and
// MHA (plain and grouped-query) read and write their heads in place, so the count does not grow
// with the number of heads.
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "model/attention.hpp"
#include "ops/backend/op_profile.hpp"
#include "test_helpers.hpp"

namespace {

// Every op the attention layer of `cfg` launches in one forward, backward_input and
// backward_weight on a batch of 2, in `inputs` precision (bf16: with bf16 activations).
long long launches(const mt::ModelConfig& cfg, mt::GemmPrecision inputs) {
  testing::StrictDevice dev;
  mt::OpProfile profile(dev.be);
  mt::ParamStore params;
  mt::LayerEnv env{&profile.backend(), inputs, &params, {}};
  env.bf16_activations = inputs == mt::GemmPrecision::bf16;
  std::unique_ptr<mt::AttentionLayer> layer = mt::make_attention(env, cfg, "blocks.0.attn", 1);
  params.finalize(dev.be, 9, cfg.init_std);
  const int batch = 2, rows = batch * cfg.seq_len;
  const mt::Buffer x = dev.upload(testing::random_floats(size_t(rows) * cfg.d_model, 21));
  const mt::Buffer dy = dev.upload(testing::random_floats(size_t(rows) * cfg.d_model, 22));
  const mt::Buffer y = dev.floats(x.count()), dx = dev.floats(x.count());
  mt::Arena arena(dev.be), temp(dev.be);
  profile.take();  // what finalize ran is not the block's
  layer->forward(0, arena, arena, temp, x.f32(), batch, y.f32());
  layer->backward_input(0, arena, dy.f32(), dx.f32(), {});
  layer->backward_weight(0);
  long long calls = 0;
  for (const mt::OpKindTime& t : profile.take()) calls += t.calls;
  return calls;
}

// cfg with `heads` query heads (grouped-query configs keep two query heads per key/value head).
mt::ModelConfig with_heads(mt::ModelConfig cfg, int heads) {
  if (cfg.attention.n_kv_heads > 0) cfg.attention.n_kv_heads = heads / 2;
  cfg.n_heads = heads;
  return cfg;
}

}  // namespace

// The bounds are the counts: MHA (plain or grouped) launches 12 GEMMs, 4 RoPEs, attention forward
// and backward, and under bf16 activations one copy of the values into bfloat16 (19); MLA 12
// GEMMs, 3 RMSNorm ops, 4 RoPEs, attention forward and backward and 7 column copies (the latent,
// every head's own key features, their shared RoPE key and the values in forward; the key
// features back, the RoPE key's sum over heads and the latent's gradient in backward): 28, and 6
// more (3 GEMMs, 3 norm ops) with query compression. Before, every head had 3 copies each way.
TEST_CASE("attention blocks: op launches of forward and backward do not depend on the number of heads") {
  for (const auto& [name, cfg] : testing::attention_variants())
    for (mt::GemmPrecision inputs : {mt::GemmPrecision::fp32, mt::GemmPrecision::bf16}) {
      CAPTURE(name);
      CAPTURE(int(inputs));
      const long long h4 = launches(with_heads(cfg, 4), inputs), h8 = launches(with_heads(cfg, 8), inputs);
      CHECK(h4 == h8);
      CHECK(h4 <= (name == "mla_q_lora" ? 34 : name == "mla" ? 28 : 19));
      MESSAGE(name << (inputs == mt::GemmPrecision::bf16 ? " bf16" : " fp32") << ": " << h4 << " launches");
    }
}
