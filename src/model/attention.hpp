#pragma once
// Causal multi-head self-attention with rotary position embeddings on queries and keys.
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/layer_env.hpp"

namespace mt {

class Attention {
 public:
  Attention(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix, int max_in_flight);
  // x, y: [batch*seq, d_model]
  void forward(int slot, Arena& arena, const float* x, int batch, float* y);
  void backward_input(int slot, Arena& arena, const float* dy, float* dx);
  void backward_weight(int slot);

  int wq, wk, wv, wo;  // parameter ids: [heads*head_dim, d_model] x3, [d_model, heads*head_dim]

 private:
  struct Saved {
    int batch = 0;
    const float* x = nullptr;
    float *q = nullptr, *k = nullptr, *v = nullptr, *probs = nullptr, *o = nullptr;
    const float* dy = nullptr;
    float *dq = nullptr, *dk = nullptr, *dv = nullptr, *dout = nullptr;
  };
  LayerEnv env_;
  int d_, heads_, head_dim_, seq_;
  float theta_;
  std::vector<Saved> saved_;
};

}  // namespace mt
