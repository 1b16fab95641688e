#pragma once
// Causal multi-head self-attention with rotary position embeddings on queries and keys, and
// grouped-query attention: n_kv_heads key/value heads, each shared by n_heads / n_kv_heads
// query heads. With tensor parallelism a rank holds heads_ = n_heads / tp of them (and their
// key/value heads); its output is a partial sum that the block adds up over the group.
#include <vector>

#include "model/attention.hpp"

namespace mt {

class Mha : public AttentionLayer {
 public:
  Mha(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix, int max_in_flight);
  void forward(int slot, Arena& arena, Arena& redo, Arena& temp, GemmOperand x, int batch, LayerOutput y) override;
  void redo(int slot, Arena& redo, GemmOperand x) override;
  void backward_input(int slot, Arena& arena, const float* dy, float* dx, const Fp8Codes& dy_codes) override;
  void backward_weight(int slot) override;

  int wq, wk, wv, wo;  // [heads*hd, d], [kv_heads*hd, d] x2, [d, heads*hd]

 private:
  struct Saved {
    int batch = 0;
    GemmOperand x;
    GemmOperand q, k, v;  // k, v per key/value head; bfloat16 under bf16_activations (attention's inputs only)
    float *lse = nullptr, *o = nullptr;
    const float* dy = nullptr;
    float *dq = nullptr, *dk = nullptr, *dv = nullptr, *dout = nullptr;  // dk, dv: per key/value head
  };
  RopeArgs rope_args(int rows, int heads, float* x, bool inverse, Bf16* out_bf16 = nullptr,
                     const Bf16* x_bf16 = nullptr) const;
  // Queries, keys and values as attention reads them, into s (q, k, v).
  void project(Saved& s, Arena& arena, Arena& temp, GemmOperand x, int rows);

  LayerEnv env_;
  int d_, heads_, kv_heads_, head_dim_, seq_;
  float theta_, scale_;  // RoPE base; attention's softmax scale
  RopeScaling yarn_;
  std::vector<Saved> saved_;
};

}  // namespace mt
