#include "model/mha.hpp"

#include <cmath>

#include "model/rope_scaling.hpp"

namespace mt {

Mha::Mha(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix, int max_in_flight)
    : env_(env), d_(cfg.d_model), heads_(cfg.n_heads / env.shard.tp_size),
      kv_heads_((cfg.attention.n_kv_heads == 0 ? cfg.n_heads : cfg.attention.n_kv_heads) / env.shard.tp_size),
      head_dim_(cfg.head_dim), seq_(cfg.seq_len), theta_(float(cfg.rope_theta)),
      scale_(attention_scale(cfg, cfg.head_dim)), yarn_(rope_scaling_of(cfg)), saved_(max_in_flight) {
  using I = ParamStore::Init;
  const ShardPlace& sh = env.shard;
  // Whole shapes; each tensor-parallel rank holds its heads: rows of the projections in, columns
  // of the projection out.
  const int64_t hd = int64_t(heads_) * sh.tp_size * head_dim_, kvd = int64_t(kv_heads_) * sh.tp_size * head_dim_;
  const Spread split = Spread::tensor_split;
  wq = env.params->add(prefix + ".wq", {hd, d_}, I::normal, true, split, sh.tp_split(0));
  wk = env.params->add(prefix + ".wk", {kvd, d_}, I::normal, true, split, sh.tp_split(0));
  wv = env.params->add(prefix + ".wv", {kvd, d_}, I::normal, true, split, sh.tp_split(0));
  wo = env.params->add(prefix + ".wo", {d_, hd}, I::normal, true, split, sh.tp_split(1));
}

RopeArgs Mha::rope_args(int rows, int heads, float* x, bool inverse, Bf16* out_bf16, const Bf16* x_bf16) const {
  return {.rows = rows, .heads = heads, .head_dim = head_dim_, .rot_offset = 0, .rot_dim = head_dim_,
          .seq_len = seq_, .theta = theta_, .inverse = inverse, .x = x, .out_bf16 = out_bf16, .scaling = yarn_,
          .x_bf16 = x_bf16};
}

// The projections are the layer's GEMMs, kept: recomputation redoes only the cheap parts. What
// attention reads is kept; an fp32 projection it reads only through a bfloat16 copy (under
// bf16_activations, RoPE rounding as it writes) is temporary; under bf16_outputs the GEMMs write
// bfloat16 themselves (the queries' and keys' temporary, RoPE reading them so). Grouped key/value
// heads are read in place by their query heads (the attention op's kv_heads): nothing is copied per head.
void Mha::project(Saved& s, Arena& arena, Arena& temp, GemmOperand x, int rows) {
  const Backend& be = env_.be();
  const int hd = heads_ * head_dim_, kvd = kv_heads_ * head_dim_;
  if (env_.bf16_outputs) {
    Bf16* q = temp.bf16s(size_t(rows) * hd);
    Bf16* k = temp.bf16s(size_t(rows) * kvd);
    Bf16* q16 = arena.bf16s(size_t(rows) * hd);
    Bf16* k16 = arena.bf16s(size_t(rows) * kvd);
    Bf16* v16 = arena.bf16s(size_t(rows) * kvd);
    env_.linear_forward(x, env_.weight(wq), rows, d_, hd, q);
    env_.linear_forward(x, env_.weight(wk), rows, d_, kvd, k);
    env_.linear_forward(x, env_.weight(wv), rows, d_, kvd, v16);
    be.rope(rope_args(rows, heads_, nullptr, false, q16, q));
    be.rope(rope_args(rows, kv_heads_, nullptr, false, k16, k));
    s.q = q16, s.k = k16, s.v = v16;
    return;
  }
  const bool half = env_.bf16_activations;
  float* q = (half ? temp : arena).floats(size_t(rows) * hd);
  float* k = (half ? temp : arena).floats(size_t(rows) * kvd);
  float* v = (half ? temp : arena).floats(size_t(rows) * kvd);
  env_.linear_forward(x, env_.weight(wq), rows, d_, hd, q);
  env_.linear_forward(x, env_.weight(wk), rows, d_, kvd, k);
  env_.linear_forward(x, env_.weight(wv), rows, d_, kvd, v);
  if (half) {
    Bf16* q16 = arena.bf16s(size_t(rows) * hd);
    Bf16* k16 = arena.bf16s(size_t(rows) * kvd);
    Bf16* v16 = arena.bf16s(size_t(rows) * kvd);
    be.rope(rope_args(rows, heads_, q, false, q16));
    be.rope(rope_args(rows, kv_heads_, k, false, k16));
    copy_block(be, rows, kvd, v, kvd, 0, v16, kvd, 0);
    s.q = q16, s.k = k16, s.v = v16;
  } else {
    be.rope(rope_args(rows, heads_, q, false));
    be.rope(rope_args(rows, kv_heads_, k, false));
    s.q = q, s.k = k, s.v = v;
  }
}

void Mha::forward(int slot, Arena& arena, Arena&, Arena& temp, GemmOperand x, int batch, LayerOutput y) {
  Saved& s = saved_[slot];
  const Backend& be = env_.be();
  const int rows = batch * seq_, hd = heads_ * head_dim_;
  s.batch = batch;
  s.x = x;
  project(s, arena, temp, x, rows);
  s.o = arena.floats(size_t(rows) * hd);
  s.lse = arena.floats(size_t(batch) * heads_ * seq_);
  // Under fp8 inputs the attention op writes its output's codes too, which only the GEMM below reads.
  const Fp8RowCodes oq = env_.fp8_row_codes(temp, rows, hd);
  GemmOperand o(s.o);
  o.fp8 = {oq.codes, oq.scales, oq.ld};
  be.attention_forward({.batch = batch, .seq = seq_, .heads = heads_, .qk_dim = head_dim_, .v_dim = head_dim_,
                        .scale = scale_, .q = s.q.f32, .k = s.k.f32, .v = s.v.f32,
                        .out = s.o, .lse = s.lse, .inputs = env_.gemm_inputs, .q_bf16 = s.q.bf16,
                        .k_bf16 = s.k.bf16, .v_bf16 = s.v.bf16, .kv_heads = kv_heads_, .out_fp8 = oq,
                        .max_logit = max_logit_});
  env_.linear_forward(o, env_.weight(wo), rows, hd, d_, y);
}

void Mha::redo(int slot, Arena&, GemmOperand x) { saved_[slot].x = x; }

void Mha::backward_input(int slot, Arena& arena, const float* dy, float* dx, const Fp8Codes& dy_codes) {
  Saved& s = saved_[slot];
  const int rows = s.batch * seq_, hd = heads_ * head_dim_, kvd = kv_heads_ * head_dim_;
  s.dy = dy;
  s.dout = arena.floats(size_t(rows) * hd);
  s.dq = arena.floats(size_t(rows) * hd);
  s.dk = arena.floats(size_t(rows) * kvd);
  s.dv = arena.floats(size_t(rows) * kvd);
  env_.linear_backward_input(dy, env_.weight(wo), rows, hd, d_, s.dout, false, dy_codes);
  // Each key/value head's gradient is its group's sum, formed inside the op.
  env_.be().attention_backward({.batch = s.batch, .seq = seq_, .heads = heads_, .qk_dim = head_dim_,
                                .v_dim = head_dim_, .scale = scale_,
                                .q = s.q.f32, .k = s.k.f32, .v = s.v.f32, .out = s.o, .lse = s.lse, .dout = s.dout,
                                .dq = s.dq, .dk = s.dk, .dv = s.dv, .inputs = env_.gemm_inputs,
                                .q_bf16 = s.q.bf16, .k_bf16 = s.k.bf16, .v_bf16 = s.v.bf16, .kv_heads = kv_heads_});
  // RoPE is a rotation, so its backward is the inverse rotation.
  env_.be().rope(rope_args(rows, heads_, s.dq, true));
  env_.be().rope(rope_args(rows, kv_heads_, s.dk, true));
  env_.linear_backward_input(s.dq, env_.weight(wq), rows, d_, hd, dx);
  env_.linear_backward_input(s.dk, env_.weight(wk), rows, d_, kvd, dx, true);
  env_.linear_backward_input(s.dv, env_.weight(wv), rows, d_, kvd, dx, true);
}

void Mha::backward_weight(int slot) {
  Saved& s = saved_[slot];
  ParamStore& p = *env_.params;
  const int rows = s.batch * seq_, hd = heads_ * head_dim_, kvd = kv_heads_ * head_dim_;
  env_.linear_backward_weight(s.dy, s.o, rows, hd, d_, p.grad(wo));
  env_.linear_backward_weight(s.dq, s.x, rows, d_, hd, p.grad(wq));
  env_.linear_backward_weight(s.dk, s.x, rows, d_, kvd, p.grad(wk));
  env_.linear_backward_weight(s.dv, s.x, rows, d_, kvd, p.grad(wv));
}

}  // namespace mt
