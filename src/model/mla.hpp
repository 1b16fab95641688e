#pragma once
// Multi-head latent attention (DeepSeek-V3 report eqs. 1-11, names as in its inference code):
//   queries: c_q = RMSNorm(W_q_a x), q = W_q_b c_q       (q_lora_rank > 0; else q = W_q x)
//            each head's q = [q_nope; RoPE(q_rope)]
//   keys/values: [c_kv; k_rope] = W_kv_a x; k_rope = RoPE(k_rope), one for all heads;
//            [k_nope; v] per head = W_kv_b RMSNorm(c_kv); each head's k = [k_nope; k_rope]
//   softmax scale 1/sqrt(qk_nope_head_dim + qk_rope_head_dim); output W_o [o_1; ...; o_H].
// With tensor parallelism a rank holds heads_ = n_heads / tp heads; the latents are computed
// whole on every rank.
#include <vector>

#include "model/attention.hpp"

namespace mt {

class Mla : public AttentionLayer {
 public:
  Mla(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix, int max_in_flight);
  void forward(int slot, Arena& arena, Arena& redo, Arena& temp, GemmOperand x, int batch, LayerOutput y) override;
  void redo(int slot, Arena& redo, GemmOperand x) override;
  void backward_input(int slot, Arena& arena, const float* dy, float* dx, const Fp8Codes& dy_codes) override;
  void backward_weight(int slot) override;

  // wq: [H*qk, d] without query compression; else wq_a [q_lora, d], q_norm [q_lora], wq_b [H*qk, q_lora].
  int wq = -1, wq_a = -1, q_norm = -1, wq_b = -1;
  int wkv_a, kv_norm, wkv_b, wo;  // [kv_lora+rope, d], [kv_lora], [H*(nope+v), kv_lora], [d, H*v]

 private:
  struct Saved {
    int batch = 0;
    GemmOperand x;
    float *cq = nullptr, *cq_rstd = nullptr;  // query latent (q_lora > 0)
    GemmOperand cq_normed, c_normed;            // the normed latents: only the up-projections read them
    float *ckv = nullptr, *c = nullptr, *c_rstd = nullptr;
    GemmOperand q, k, v;  // per head, read only by attention's products
    float *lse = nullptr, *o = nullptr;
    const float* dy = nullptr;
    float *dq = nullptr, *dcq_normed = nullptr, *dcq = nullptr;
    float *dkv = nullptr, *dc_normed = nullptr, *dckv = nullptr;
  };
  // Each head's queries, keys and values from the latents (the up-projections), into `redo`.
  void project_heads(Saved& s, Arena& redo, Arena& temp, int rows);
  RopeArgs query_rope(int rows, float* q, bool inverse, Bf16* out_bf16 = nullptr, const Bf16* q_bf16 = nullptr) const;
  // The queries as attention reads them (rotated), into `redo`.
  GemmOperand project_queries(const Saved& s, Arena& redo, Arena& temp, int rows);
  RopeArgs key_rope(int rows, float* ckv, bool inverse) const;

  LayerEnv env_;
  int d_, heads_, seq_, q_lora_, kv_lora_, nope_, rope_, vdim_, qk_;
  float eps_, theta_, scale_;  // RMSNorm epsilon; RoPE base; attention's softmax scale
  RopeScaling yarn_;
  std::vector<Saved> saved_;
};

}  // namespace mt
