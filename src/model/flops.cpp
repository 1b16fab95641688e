#include "model/flops.hpp"

#include <algorithm>

#include "util/error.hpp"

namespace mt {

namespace {
double swiglu_params(const ModelConfig& m, double hidden) { return 3.0 * m.d_model * hidden; }

// Query-key and value widths of one head.
double qk_dim(const ModelConfig& m) {
  const auto& a = m.attention;
  return a.kind == AttentionKind::mla ? a.qk_nope_head_dim + a.qk_rope_head_dim : m.head_dim;
}
double v_dim(const ModelConfig& m) {
  return m.attention.kind == AttentionKind::mla ? m.attention.v_head_dim : m.head_dim;
}

// Matrix parameters of a block's FFN that one token passes through, or that exist.
double ffn_active(const ModelConfig& m, bool moe) {
  const auto& e = m.moe;
  if (!moe) return swiglu_params(m, m.ffn_hidden);
  return double(m.d_model) * e.n_routed_experts +
         swiglu_params(m, (double(e.n_shared_experts) + e.top_k) * e.expert_hidden);
}
double ffn_total(const ModelConfig& m, bool moe) {
  const auto& e = m.moe;
  if (!moe) return swiglu_params(m, m.ffn_hidden);
  return double(m.d_model) * e.n_routed_experts +
         swiglu_params(m, (double(e.n_shared_experts) + e.n_routed_experts) * e.expert_hidden);
}
// RMSNorm weights of a block: attention and FFN norms, plus MLA's latent norms.
double block_norms(const ModelConfig& m) {
  double n = 2.0 * m.d_model;
  if (m.attention.kind == AttentionKind::mla) n += m.attention.kv_lora_rank + m.attention.q_lora_rank;
  return n;
}
bool mtp_is_moe(const ModelConfig& m) { return m.n_layers > m.n_dense_layers; }
}  // namespace

double attention_matmul_params(const ModelConfig& m) {
  const auto& a = m.attention;
  const double d = m.d_model, H = m.n_heads;
  if (a.kind == AttentionKind::mla) {
    const double q = a.q_lora_rank > 0 ? d * a.q_lora_rank + a.q_lora_rank * H * qk_dim(m) : d * H * qk_dim(m);
    const double kv = d * (a.kv_lora_rank + a.qk_rope_head_dim) +
                      double(a.kv_lora_rank) * H * (a.qk_nope_head_dim + a.v_head_dim);
    return q + kv + H * a.v_head_dim * d;
  }
  const double kv_heads = a.n_kv_heads > 0 ? a.n_kv_heads : H;
  return 2.0 * d * H * m.head_dim + 2.0 * d * kv_heads * m.head_dim;
}

double active_matmul_params(const ModelConfig& m) {
  const double head = double(m.vocab_size) * m.d_model;
  double n = m.n_layers * attention_matmul_params(m) + head;
  for (int i = 0; i < m.n_layers; ++i) n += ffn_active(m, i >= m.n_dense_layers);
  // Each MTP module: the [2d -> d] projection, one block, and another pass through the head.
  n += m.mtp.depth * (2.0 * m.d_model * m.d_model + attention_matmul_params(m) + ffn_active(m, mtp_is_moe(m)) + head);
  return n;
}

double attention_core_forward_flops_per_token(const ModelConfig& m) {
  // Causal attention: a token's query meets seq_len/2 keys on average; QK^T and PV cost
  // 2 * heads * (qk + v) * seq_len/2 forward.
  return (m.n_layers + m.mtp.depth) * double(m.n_heads) * (qk_dim(m) + v_dim(m)) * double(m.seq_len);
}

double training_flops_per_token(const ModelConfig& m) {
  return 6.0 * active_matmul_params(m) + 3.0 * attention_core_forward_flops_per_token(m);
}

std::vector<double> forward_flops_per_block(const ModelConfig& m) {
  const double core = attention_core_forward_flops_per_token(m) / (m.n_layers + m.mtp.depth);
  const double head = 2.0 * m.vocab_size * m.d_model;
  std::vector<double> blocks;
  for (int i = 0; i < m.n_layers; ++i)
    blocks.push_back(2.0 * (attention_matmul_params(m) + ffn_active(m, i >= m.n_dense_layers)) + core);
  blocks.push_back(head);
  for (int k = 0; k < m.mtp.depth; ++k)
    blocks.push_back(2.0 * (2.0 * m.d_model * m.d_model + attention_matmul_params(m) + ffn_active(m, mtp_is_moe(m))) +
                     core + head);
  return blocks;
}

namespace {

// Layers [cut[s], cut[s+1]) per stage, each stage filled greedily up to `ceiling` while every later
// stage keeps a layer; the last takes the rest and the tail (head, MTP). Empty when the last
// stage ends above the ceiling.
std::vector<int> cut_under(const std::vector<double>& layers, double tail, int stages, double ceiling) {
  std::vector<int> cut{0};
  size_t i = 0;
  for (int s = 0; s + 1 < stages; ++s) {
    double sum = 0;
    while (layers.size() - i > size_t(stages - s - 1) && (sum == 0 || sum + layers[i] <= ceiling)) sum += layers[i++];
    cut.push_back(int(i));
  }
  double last = tail;
  for (; i < layers.size(); ++i) last += layers[i];
  cut.push_back(int(layers.size()));
  return last <= ceiling ? cut : std::vector<int>{};
}

}  // namespace

std::vector<int> pipeline_cut(const ModelConfig& m, int stages) {
  MT_CHECK(stages >= 1 && stages <= m.n_layers);
  const std::vector<double> blocks = forward_flops_per_block(m);
  const std::vector<double> layers(blocks.begin(), blocks.begin() + m.n_layers);
  double tail = 0, lo = 0, hi = 0;
  for (size_t b = size_t(m.n_layers); b < blocks.size(); ++b) tail += blocks[b];
  for (double f : layers) lo = std::max(lo, f), hi += f;
  hi += tail;
  // The lightest feasible ceiling (no stage is lighter than the heaviest layer), to within 60
  // halvings: the greedy cut under a ceiling fits whenever any cut does.
  for (int it = 0; it < 60; ++it) {
    const double mid = 0.5 * (lo + hi);
    (cut_under(layers, tail, stages, mid).empty() ? lo : hi) = mid;
  }
  return cut_under(layers, tail, stages, hi);
}

std::vector<double> stage_forward_flops(const ModelConfig& m, const std::vector<int>& cut) {
  const std::vector<double> blocks = forward_flops_per_block(m);
  std::vector<double> out;
  for (size_t s = 0; s + 1 < cut.size(); ++s) {
    double sum = 0;
    for (int b = cut[s]; b < cut[s + 1]; ++b) sum += blocks[size_t(b)];
    if (s + 2 == cut.size())
      for (size_t b = size_t(m.n_layers); b < blocks.size(); ++b) sum += blocks[b];
    out.push_back(sum);
  }
  return out;
}

int moe_layer_count(const ModelConfig& m) {
  return m.n_layers - m.n_dense_layers + (mtp_is_moe(m) ? m.mtp.depth : 0);
}

double routed_expert_params(const ModelConfig& m) {
  return moe_layer_count(m) * swiglu_params(m, double(m.moe.n_routed_experts) * m.moe.expert_hidden);
}

double total_params(const ModelConfig& m) {
  const double d = m.d_model;
  double n = m.n_layers * (attention_matmul_params(m) + block_norms(m));
  for (int i = 0; i < m.n_layers; ++i) n += ffn_total(m, i >= m.n_dense_layers);
  n += 2.0 * double(m.vocab_size) * d + d;  // embedding, head, final norm
  // MTP modules share the embedding and the head: projection, three norms and a block each.
  n += m.mtp.depth *
       (2.0 * d * d + 3.0 * d + attention_matmul_params(m) + block_norms(m) + ffn_total(m, mtp_is_moe(m)));
  return n;
}

}  // namespace mt
