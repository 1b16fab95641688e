#include "model/attention.hpp"

#include <cmath>

namespace mt {

Attention::Attention(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix, int max_in_flight)
    : env_(env), d_(cfg.d_model), heads_(cfg.n_heads), head_dim_(cfg.head_dim), seq_(cfg.seq_len),
      theta_(float(cfg.rope_theta)), saved_(max_in_flight) {
  using I = ParamStore::Init;
  const int64_t hd = int64_t(heads_) * head_dim_;
  wq = env.params->add(prefix + ".wq", {hd, d_}, I::normal, true);
  wk = env.params->add(prefix + ".wk", {hd, d_}, I::normal, true);
  wv = env.params->add(prefix + ".wv", {hd, d_}, I::normal, true);
  wo = env.params->add(prefix + ".wo", {d_, hd}, I::normal, true);
}

void Attention::forward(int slot, Arena& arena, const float* x, int batch, float* y) {
  Saved& s = saved_[slot];
  ParamStore& p = *env_.params;
  const int rows = batch * seq_, hd = heads_ * head_dim_;
  s.batch = batch;
  s.x = x;
  s.q = arena.floats(size_t(rows) * hd);
  s.k = arena.floats(size_t(rows) * hd);
  s.v = arena.floats(size_t(rows) * hd);
  s.o = arena.floats(size_t(rows) * hd);
  s.probs = arena.floats(size_t(batch) * heads_ * seq_ * seq_);
  env_.linear_forward(x, p.value(wq), rows, d_, hd, s.q);
  env_.linear_forward(x, p.value(wk), rows, d_, hd, s.k);
  env_.linear_forward(x, p.value(wv), rows, d_, hd, s.v);
  RopeArgs rope{.rows = rows, .heads = heads_, .head_dim = head_dim_, .rot_offset = 0, .rot_dim = head_dim_,
                .seq_len = seq_, .theta = theta_};
  rope.x = s.q;
  env_.be().rope(rope);
  rope.x = s.k;
  env_.be().rope(rope);
  env_.be().attention_forward({.batch = batch, .seq = seq_, .heads = heads_, .qk_dim = head_dim_,
                               .v_dim = head_dim_, .scale = 1.0f / std::sqrt(float(head_dim_)),
                               .q = s.q, .k = s.k, .v = s.v, .out = s.o, .probs = s.probs});
  env_.linear_forward(s.o, p.value(wo), rows, hd, d_, y);
}

void Attention::backward_input(int slot, Arena& arena, const float* dy, float* dx) {
  Saved& s = saved_[slot];
  ParamStore& p = *env_.params;
  const int rows = s.batch * seq_, hd = heads_ * head_dim_;
  s.dy = dy;
  s.dout = arena.floats(size_t(rows) * hd);
  s.dq = arena.floats(size_t(rows) * hd);
  s.dk = arena.floats(size_t(rows) * hd);
  s.dv = arena.floats(size_t(rows) * hd);
  env_.linear_backward_input(dy, p.value(wo), rows, hd, d_, s.dout);
  env_.be().attention_backward({.batch = s.batch, .seq = seq_, .heads = heads_, .qk_dim = head_dim_,
                                .v_dim = head_dim_, .scale = 1.0f / std::sqrt(float(head_dim_)),
                                .q = s.q, .k = s.k, .v = s.v, .probs = s.probs, .dout = s.dout,
                                .dq = s.dq, .dk = s.dk, .dv = s.dv});
  // RoPE is a rotation, so its backward is the inverse rotation.
  RopeArgs rope{.rows = rows, .heads = heads_, .head_dim = head_dim_, .rot_offset = 0, .rot_dim = head_dim_,
                .seq_len = seq_, .theta = theta_, .inverse = true};
  rope.x = s.dq;
  env_.be().rope(rope);
  rope.x = s.dk;
  env_.be().rope(rope);
  env_.linear_backward_input(s.dq, p.value(wq), rows, d_, hd, dx);
  env_.linear_backward_input(s.dk, p.value(wk), rows, d_, hd, dx, true);
  env_.linear_backward_input(s.dv, p.value(wv), rows, d_, hd, dx, true);
}

void Attention::backward_weight(int slot) {
  Saved& s = saved_[slot];
  ParamStore& p = *env_.params;
  const int rows = s.batch * seq_, hd = heads_ * head_dim_;
  env_.linear_backward_weight(s.dy, s.o, rows, hd, d_, p.grad(wo));
  env_.linear_backward_weight(s.dq, s.x, rows, d_, hd, p.grad(wq));
  env_.linear_backward_weight(s.dk, s.x, rows, d_, hd, p.grad(wk));
  env_.linear_backward_weight(s.dv, s.x, rows, d_, hd, p.grad(wv));
}

}  // namespace mt
