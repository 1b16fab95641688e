#pragma once
// Generation one position at a time: the forward pass of a trained model over a new position
// (the MTP modules, training's auxiliary heads, take no part), with a cache of what every earlier
// position leaves for attention, so no position's projections are computed twice.
//   MHA/GQA  each layer caches the rotated keys and the values of its key/value heads.
//   MLA      each layer caches what DeepSeek-V2/V3 do: per position the normed latent c_kv
//            [kv_lora_rank] and the shared rotated key [qk_rope_head_dim] (576 values for
//            DeepSeek-V3's 128 heads, against 32768 for their keys and values). For each new
//            position the cache is projected up to per-head keys and values (the weights are
//            not absorbed into the query: simpler, and exact to training's order of products).
// The ops are training's, in fp32, so a position's logits match the training forward's over the
// same tokens (tests/test_decoder.cpp checks every position of MHA, GQA, MLA, MoE, YaRN models).
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"
#include "model/params.hpp"
#include "tensor/arena.hpp"

namespace mt {

class Decoder {
 public:
  // `params`: a one-rank Model's parameters on its device, values loaded; at most `max_len`
  // positions (the cache is allocated for them).
  Decoder(const ModelConfig& cfg, const ParamStore& params, int max_len);
  // The token at the next position in; the logits for the position after it out [vocab].
  std::vector<float> step(int token);
  int position() const { return pos_; }
  int max_len() const { return max_len_; }

 private:
  struct LayerCache {
    Buffer keys;    // MHA: [max_len, kv_heads * head_dim] rotated keys; MLA: [max_len, kv_lora_rank] normed latents
    Buffer values;  // MHA: [max_len, kv_heads * head_dim]; MLA: [max_len, qk_rope_head_dim] rotated shared keys
  };
  const float* weight(const std::string& name) const;
  float* linear(const float* x, const float* w, int rows, int in, int out);
  void norm_into(const float* x, const float* w, int dim, float* y);
  float* norm(const float* x, const float* w, int dim);
  float* swiglu(const float* x, const float* gate, const float* up, const float* down, int hidden);
  float* mha(int layer, const float* x);
  float* mla(int layer, const float* x);
  float* moe(const std::string& prefix, const float* x);

  ModelConfig cfg_;
  const ParamStore& params_;
  Backend be_;
  Arena work_;  // one position's temporaries
  int max_len_, pos_ = 0;
  float scale_;
  RopeScaling yarn_;
  std::unordered_map<std::string, int> ids_, buffer_ids_;
  std::vector<LayerCache> cache_;
};

}  // namespace mt
