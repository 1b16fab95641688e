#include "infer/decoder.hpp"

#include <numeric>

#include "model/attention.hpp"
#include "model/rope_scaling.hpp"
#include "util/error.hpp"

namespace mt {

Decoder::Decoder(const ModelConfig& cfg, const ParamStore& params, int max_len)
    : cfg_(cfg), params_(params), be_(params.backend()), work_(params.backend()), max_len_(max_len),
      yarn_(rope_scaling_of(cfg)), ids_(params.ids_by_name()), buffer_ids_(params.buffer_ids_by_name()) {
  const auto& a = cfg.attention;
  const bool mla = a.kind == AttentionKind::mla;
  scale_ = attention_scale(cfg, mla ? a.qk_nope_head_dim + a.qk_rope_head_dim : cfg.head_dim);
  for (const ParamInfo& info : params.infos) MT_CHECK(info.shape == info.global_shape);  // one rank holds everything
  const size_t kv = size_t(a.n_kv_heads ? a.n_kv_heads : cfg.n_heads) * cfg.head_dim;
  for (int i = 0; i < cfg.n_layers; ++i)
    cache_.push_back({Buffer(be_, DType::f32, size_t(max_len) * (mla ? a.kv_lora_rank : kv)),
                      Buffer(be_, DType::f32, size_t(max_len) * (mla ? a.qk_rope_head_dim : kv))});
}

const float* Decoder::weight(const std::string& name) const {
  auto it = ids_.find(name);
  if (it == ids_.end()) throw std::logic_error("Decoder: the model has no parameter " + name);
  return params_.value(it->second);
}

float* Decoder::linear(const float* x, const float* w, int rows, int in, int out) {
  float* y = work_.floats(size_t(rows) * out);
  be_.gemm({.m = rows, .n = out, .k = in, .a = x, .b = w, .trans_b = true, .c = y});
  return y;
}

void Decoder::norm_into(const float* x, const float* w, int dim, float* y) {
  be_.rmsnorm_forward({.rows = 1, .dim = dim, .eps = float(cfg_.norm_eps), .x = x, .weight = w, .y = y,
                       .rstd = work_.floats(1)});
}

float* Decoder::norm(const float* x, const float* w, int dim) {
  float* y = work_.floats(size_t(dim));
  norm_into(x, w, dim, y);
  return y;
}

float* Decoder::swiglu(const float* x, const float* gate, const float* up, const float* down, int hidden) {
  const int D = cfg_.d_model;
  float* h = work_.floats(size_t(hidden));
  be_.swiglu_forward(
      {.n = size_t(hidden), .gate = linear(x, gate, 1, D, hidden), .up = linear(x, up, 1, D, hidden), .h = h});
  return linear(h, down, 1, hidden, D);
}

float* Decoder::mha(int layer, const float* x) {
  const std::string p = "blocks." + std::to_string(layer) + ".attn";
  const int D = cfg_.d_model, H = cfg_.n_heads, hd = cfg_.head_dim;
  const int KV = cfg_.attention.n_kv_heads ? cfg_.attention.n_kv_heads : H;
  LayerCache& c = cache_[size_t(layer)];
  float* k = c.keys.f32() + size_t(pos_) * KV * hd;
  float* v = c.values.f32() + size_t(pos_) * KV * hd;
  float* q = linear(x, weight(p + ".wq"), 1, D, H * hd);
  be_.gemm({.m = 1, .n = KV * hd, .k = D, .a = x, .b = weight(p + ".wk"), .trans_b = true, .c = k});
  be_.gemm({.m = 1, .n = KV * hd, .k = D, .a = x, .b = weight(p + ".wv"), .trans_b = true, .c = v});
  for (auto [rows, heads] : {std::pair{q, H}, std::pair{k, KV}})
    be_.rope({.rows = 1, .heads = heads, .head_dim = hd, .rot_offset = 0, .rot_dim = hd, .seq_len = 1,
              .first_position = pos_, .theta = float(cfg_.rope_theta), .x = rows, .scaling = yarn_});
  float* o = work_.floats(size_t(H) * hd);
  be_.attention_decode({.length = pos_ + 1, .heads = H, .kv_heads = KV, .qk_dim = hd, .v_dim = hd, .scale = scale_,
                        .q = q, .k = c.keys.f32(), .v = c.values.f32(), .scores = work_.floats(size_t(H) * (pos_ + 1)),
                        .out = o});
  return linear(o, weight(p + ".wo"), 1, H * hd, D);
}

float* Decoder::mla(int layer, const float* x) {
  const std::string p = "blocks." + std::to_string(layer) + ".attn";
  const auto& a = cfg_.attention;
  const int D = cfg_.d_model, H = cfg_.n_heads, ql = a.q_lora_rank, kl = a.kv_lora_rank, rope = a.qk_rope_head_dim,
            nope = a.qk_nope_head_dim, vd = a.v_head_dim, qk = nope + rope, kvw = nope + vd, L = pos_ + 1;
  const float theta = float(cfg_.rope_theta);
  LayerCache& c = cache_[size_t(layer)];
  float* q = ql > 0 ? linear(norm(linear(x, weight(p + ".wq_a"), 1, D, ql), weight(p + ".q_norm"), ql),
                             weight(p + ".wq_b"), 1, ql, H * qk)
                    : linear(x, weight(p + ".wq"), 1, D, H * qk);
  be_.rope({.rows = 1, .heads = H, .head_dim = qk, .rot_offset = nope, .rot_dim = rope, .seq_len = 1,
            .first_position = pos_, .theta = theta, .x = q, .scaling = yarn_});
  // This position's latent and shared key, rotated, into the cache.
  float* ckv = linear(x, weight(p + ".wkv_a"), 1, D, kl + rope);
  be_.rope({.rows = 1, .heads = 1, .head_dim = kl + rope, .rot_offset = kl, .rot_dim = rope, .seq_len = 1,
            .first_position = pos_, .theta = theta, .x = ckv, .scaling = yarn_});
  norm_into(ckv, weight(p + ".kv_norm"), kl, c.keys.f32() + size_t(pos_) * kl);
  be_.copy(c.values.f32() + size_t(pos_) * rope, ckv + kl, size_t(rope) * sizeof(float));
  // Every cached position's keys and values per head.
  float* kv = linear(c.keys.f32(), weight(p + ".wkv_b"), L, kl, H * kvw);
  float* k = work_.floats(size_t(L) * H * qk);
  float* v = work_.floats(size_t(L) * H * vd);
  for (int h = 0; h < H; ++h) {
    copy_block(be_, L, nope, kv, H * kvw, h * kvw, k, H * qk, h * qk);
    copy_block(be_, L, rope, c.values.f32(), rope, 0, k, H * qk, h * qk + nope);
    copy_block(be_, L, vd, kv, H * kvw, h * kvw + nope, v, H * vd, h * vd);
  }
  float* o = work_.floats(size_t(H) * vd);
  be_.attention_decode({.length = L, .heads = H, .kv_heads = H, .qk_dim = qk, .v_dim = vd, .scale = scale_, .q = q,
                        .k = k, .v = v, .scores = work_.floats(size_t(H) * L), .out = o});
  return linear(o, weight(p + ".wo"), 1, H * vd, D);
}

float* Decoder::moe(const std::string& p, const float* x) {
  const auto& m = cfg_.moe;
  const int D = cfg_.d_model, E = m.n_routed_experts, K = m.top_k, hid = m.expert_hidden;
  float* scores = linear(x, weight(p + ".router"), 1, D, E);
  be_.sigmoid({.n = size_t(E), .x = scores, .y = scores});
  int* chosen = work_.ints(size_t(K));
  float* gates = work_.floats(size_t(K));
  be_.router_select({.tokens = 1, .experts = E, .top_k = K, .n_groups = m.n_groups, .topk_groups = m.topk_groups,
                     .route_scale = float(m.route_scale), .scores = scores,
                     .bias = params_.buffer(buffer_ids_.at(p + ".router_bias")), .chosen = chosen, .gates = gates});
  std::vector<int> experts(static_cast<size_t>(K));
  be_.download(experts.data(), chosen, size_t(K) * sizeof(int));
  float* y;
  if (m.n_shared_experts > 0)
    y = swiglu(x, weight(p + ".shared.w_gate"), weight(p + ".shared.w_up"), weight(p + ".shared.w_down"),
               m.n_shared_experts * hid);
  else
    y = work_.zeros(size_t(D));
  // The chosen experts' outputs, gated and summed in training's order (moe_combine).
  float* rows = work_.floats(size_t(K) * D);
  const size_t matrix = size_t(hid) * D;
  for (int k = 0; k < K; ++k) {
    const size_t e = size_t(experts[size_t(k)]);
    const float* out = swiglu(x, weight(p + ".experts.w_gate") + e * matrix, weight(p + ".experts.w_up") + e * matrix,
                              weight(p + ".experts.w_down") + e * matrix, hid);
    be_.copy(rows + size_t(k) * D, out, size_t(D) * sizeof(float));
  }
  std::vector<int> order(static_cast<size_t>(K));
  std::iota(order.begin(), order.end(), 0);
  int* slot_row = work_.ints(size_t(K));
  be_.upload(slot_row, order.data(), size_t(K) * sizeof(int));
  be_.moe_combine({.tokens = 1, .top_k = K, .dim = D, .rows = rows, .slot_row = slot_row, .gates = gates, .y = y});
  return y;
}

std::vector<float> Decoder::step(int token) {
  if (pos_ >= max_len_)
    throw UserError("the decoder's cache holds " + std::to_string(max_len_) + " positions, all used");
  if (token < 0 || token >= cfg_.vocab_size)
    throw UserError("token " + std::to_string(token) + " is outside the model's vocabulary of " +
                    std::to_string(cfg_.vocab_size));
  const int D = cfg_.d_model, V = cfg_.vocab_size;
  work_.reset();
  int* id = work_.ints(1);
  be_.upload(id, &token, sizeof(int));
  float* x = work_.floats(size_t(D));
  be_.embedding_forward({.rows = 1, .dim = D, .tokens = id, .table = weight("embedding"), .out = x});
  for (int i = 0; i < cfg_.n_layers; ++i) {
    const std::string p = "blocks." + std::to_string(i);
    float* h = cfg_.attention.kind == AttentionKind::mla ? mla(i, norm(x, weight(p + ".attn_norm"), D))
                                            : mha(i, norm(x, weight(p + ".attn_norm"), D));
    be_.add({.n = size_t(D), .x = x, .y = h});
    const float* n2 = norm(h, weight(p + ".ffn_norm"), D);
    x = i < cfg_.n_dense_layers
            ? swiglu(n2, weight(p + ".ffn.w_gate"), weight(p + ".ffn.w_up"), weight(p + ".ffn.w_down"), cfg_.ffn_hidden)
            : moe(p + ".moe", n2);
    be_.add({.n = size_t(D), .x = h, .y = x});
  }
  const float* logits = linear(norm(x, weight("final_norm"), D), weight("head"), 1, D, V);
  std::vector<float> out(static_cast<size_t>(V));
  be_.download(out.data(), logits, size_t(V) * sizeof(float));
  ++pos_;
  return out;
}

}  // namespace mt
