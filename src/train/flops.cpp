#include "train/flops.hpp"

namespace mt {

namespace {
double attention_params(const ModelConfig& m) { return 4.0 * m.d_model * m.n_heads * m.head_dim; }
double swiglu_params(const ModelConfig& m, double hidden) { return 3.0 * m.d_model * hidden; }
}  // namespace

double active_matmul_params(const ModelConfig& m) {
  const auto& e = m.moe;
  const int moe_layers = m.n_layers - m.n_dense_layers;
  double n = m.n_layers * attention_params(m);
  n += m.n_dense_layers * swiglu_params(m, m.ffn_hidden);
  n += moe_layers * (double(m.d_model) * e.n_routed_experts +
                     swiglu_params(m, double(e.n_shared_experts + e.top_k) * e.expert_hidden));
  n += double(m.vocab_size) * m.d_model;  // output head
  return n;
}

double training_flops_per_token(const ModelConfig& m) {
  return 6.0 * active_matmul_params(m) + 6.0 * m.n_layers * m.n_heads * m.head_dim * double(m.seq_len);
}

double total_params(const ModelConfig& m) {
  const auto& e = m.moe;
  const int moe_layers = m.n_layers - m.n_dense_layers;
  double n = m.n_layers * (attention_params(m) + 2.0 * m.d_model);
  n += m.n_dense_layers * swiglu_params(m, m.ffn_hidden);
  n += moe_layers * (double(m.d_model) * e.n_routed_experts +
                     swiglu_params(m, double(e.n_shared_experts + e.n_routed_experts) * e.expert_hidden));
  n += 2.0 * double(m.vocab_size) * m.d_model + m.d_model;
  return n;
}

}  // namespace mt
