#include "model/mla.hpp"

#include <cmath>

#include "model/rope_scaling.hpp"

namespace mt {

Mla::Mla(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix, int max_in_flight)
    : env_(env), d_(cfg.d_model), heads_(cfg.n_heads / env.shard.tp_size), seq_(cfg.seq_len),
      q_lora_(cfg.attention.q_lora_rank), kv_lora_(cfg.attention.kv_lora_rank), nope_(cfg.attention.qk_nope_head_dim),
      rope_(cfg.attention.qk_rope_head_dim), vdim_(cfg.attention.v_head_dim),
      qk_(cfg.attention.qk_nope_head_dim + cfg.attention.qk_rope_head_dim), eps_(float(cfg.norm_eps)),
      theta_(float(cfg.rope_theta)),
      scale_(attention_scale(cfg, cfg.attention.qk_nope_head_dim + cfg.attention.qk_rope_head_dim)),
      yarn_(rope_scaling_of(cfg)), saved_(max_in_flight) {
  using I = ParamStore::Init;
  ParamStore& p = *env.params;
  const ShardPlace& sh = env.shard;
  const int64_t D = d_, H = cfg.n_heads;
  // Per-head projections split by heads over the tensor-parallel group; the latent projections
  // and their norms are whole on every rank, and each rank's heads feed part of their gradient.
  const Spread split = Spread::tensor_split, partial = Spread::tensor_partial;
  if (q_lora_ > 0) {
    wq_a = p.add(prefix + ".wq_a", {q_lora_, D}, I::normal, true, partial);
    q_norm = p.add(prefix + ".q_norm", {q_lora_}, I::ones, false, partial);
    wq_b = p.add(prefix + ".wq_b", {H * qk_, q_lora_}, I::normal, true, split, sh.tp_split(0));
  } else {
    wq = p.add(prefix + ".wq", {H * qk_, D}, I::normal, true, split, sh.tp_split(0));
  }
  wkv_a = p.add(prefix + ".wkv_a", {kv_lora_ + rope_, D}, I::normal, true, partial);
  kv_norm = p.add(prefix + ".kv_norm", {kv_lora_}, I::ones, false, partial);
  wkv_b = p.add(prefix + ".wkv_b", {H * (nope_ + vdim_), kv_lora_}, I::normal, true, split, sh.tp_split(0));
  wo = p.add(prefix + ".wo", {D, H * vdim_}, I::normal, true, split, sh.tp_split(1));
}

// The last rope_ features of each head of q rotate.
RopeArgs Mla::query_rope(int rows, float* q, bool inverse, Bf16* out_bf16, const Bf16* q_bf16) const {
  return {.rows = rows, .heads = heads_, .head_dim = qk_, .rot_offset = nope_, .rot_dim = rope_,
          .seq_len = seq_, .theta = theta_, .inverse = inverse, .x = q, .out_bf16 = out_bf16, .scaling = yarn_,
          .x_bf16 = q_bf16};
}
// The shared key part is the last rope_ features of each row of [c_kv; k_rope].
RopeArgs Mla::key_rope(int rows, float* ckv, bool inverse) const {
  return {.rows = rows, .heads = 1, .head_dim = kv_lora_ + rope_, .rot_offset = kv_lora_, .rot_dim = rope_,
          .seq_len = seq_, .theta = theta_, .inverse = inverse, .x = ckv, .scaling = yarn_};
}

void Mla::forward(int slot, Arena& arena, Arena& redo, Arena& temp, GemmOperand x, int batch, LayerOutput y) {
  Saved& s = saved_[slot];
  ParamStore& p = *env_.params;
  const Backend& be = env_.be();
  const int rows = batch * seq_, H = heads_, ckv_w = kv_lora_ + rope_;
  s.batch = batch;
  s.x = x;
  if (q_lora_ > 0) {
    s.cq = arena.floats(size_t(rows) * q_lora_);
    s.cq_rstd = arena.floats(rows);
    env_.linear_forward(x, env_.weight(wq_a), rows, d_, q_lora_, s.cq);
    s.cq_normed = env_.rmsnorm_for_gemms(
        arena, {.rows = rows, .dim = q_lora_, .eps = eps_, .x = s.cq, .weight = p.value(q_norm), .rstd = s.cq_rstd});
  }
  s.ckv = arena.floats(size_t(rows) * ckv_w);
  env_.linear_forward(x, env_.weight(wkv_a), rows, d_, ckv_w, s.ckv);
  be.rope(key_rope(rows, s.ckv, false));
  s.c = arena.floats(size_t(rows) * kv_lora_);
  copy_block(be, rows, kv_lora_, s.ckv, ckv_w, 0, s.c, kv_lora_, 0);
  s.c_rstd = arena.floats(rows);
  s.c_normed = env_.rmsnorm_for_gemms(
      arena, {.rows = rows, .dim = kv_lora_, .eps = eps_, .x = s.c, .weight = p.value(kv_norm), .rstd = s.c_rstd});
  project_heads(s, redo, temp, rows);
  s.o = arena.floats(size_t(rows) * H * vdim_);
  s.lse = arena.floats(size_t(batch) * H * seq_);
  // Under fp8 inputs the attention op writes its output's codes too, which only the GEMM below reads.
  const Fp8RowCodes oq = env_.fp8_row_codes(temp, rows, H * vdim_);
  GemmOperand o(s.o);
  o.fp8 = {oq.codes, oq.scales, oq.ld};
  be.attention_forward({.batch = batch, .seq = seq_, .heads = H, .qk_dim = qk_, .v_dim = vdim_,
                        .scale = scale_, .q = s.q.f32, .k = s.k.f32, .v = s.v.f32,
                        .out = s.o, .lse = s.lse, .inputs = env_.gemm_inputs, .q_bf16 = s.q.bf16,
                        .k_bf16 = s.k.bf16, .v_bf16 = s.v.bf16, .out_fp8 = oq,
                        .max_logit = max_logit_});
  env_.linear_forward(o, env_.weight(wo), rows, H * vdim_, d_, y);
}

// DeepSeek-V3 recomputes these up-projections in backward (report §3.2.3): per head they are
// wider than the latents they come from. The fp32 [k_nope; v] projection (and under
// bf16_activations the queries' fp32 projection) only feed the per-head copies: temporary.
// Under bf16_outputs the queries' GEMM writes bfloat16 (temporary), which RoPE reads.
GemmOperand Mla::project_queries(const Saved& s, Arena& redo, Arena& temp, int rows) {
  const Backend& be = env_.be();
  const size_t n = size_t(rows) * heads_ * qk_;
  const GemmOperand x = q_lora_ > 0 ? s.cq_normed : s.x;
  const int in = q_lora_ > 0 ? q_lora_ : d_, w = q_lora_ > 0 ? wq_b : wq;
  if (env_.bf16_outputs) {
    Bf16* q = temp.bf16s(n);
    env_.linear_forward(x, env_.weight(w), rows, in, heads_ * qk_, q);
    Bf16* q16 = redo.bf16s(n);
    be.rope(query_rope(rows, nullptr, false, q16, q));
    return q16;
  }
  const bool half = env_.bf16_activations;
  float* q = (half ? temp : redo).floats(n);
  env_.linear_forward(x, env_.weight(w), rows, in, heads_ * qk_, q);
  if (!half) {
    be.rope(query_rope(rows, q, false));
    return q;
  }
  Bf16* q16 = redo.bf16s(n);
  be.rope(query_rope(rows, q, false, q16));
  return q16;
}

void Mla::project_heads(Saved& s, Arena& redo, Arena& temp, int rows) {
  const Backend& be = env_.be();
  const int H = heads_, ckv_w = kv_lora_ + rope_, kv_w = nope_ + vdim_;
  const bool half = env_.bf16_activations;
  s.q = project_queries(s, redo, temp, rows);
  float* kv = temp.floats(size_t(rows) * H * kv_w);
  env_.linear_forward(s.c_normed, env_.weight(wkv_b), rows, kv_lora_, H * kv_w, kv);
  // Keys and values per head: only attention's products read them (in bfloat16 under bf16_activations).
  // One op per part for every head: the keys' own features, the shared RoPE key, the values.
  auto assemble = [&](auto* k, auto* v) {
    copy_heads(be, {.rows = rows, .cols = nope_, .src = kv, .src_stride = H * kv_w, .dst_stride = H * qk_,
                    .groups = H, .src_group = kv_w, .dst_group = qk_}, k);
    copy_heads(be, {.rows = rows, .cols = rope_, .src = s.ckv + kv_lora_, .src_stride = ckv_w,
                    .dst_stride = H * qk_, .groups = H, .src_group = 0, .dst_group = qk_}, k + nope_);
    copy_heads(be, {.rows = rows, .cols = vdim_, .src = kv + nope_, .src_stride = H * kv_w, .dst_stride = H * vdim_,
                    .groups = H, .src_group = kv_w, .dst_group = vdim_}, v);
    s.k = k, s.v = v;
  };
  if (half) assemble(redo.bf16s(size_t(rows) * H * qk_), redo.bf16s(size_t(rows) * H * vdim_));
  else assemble(redo.floats(size_t(rows) * H * qk_), redo.floats(size_t(rows) * H * vdim_));
}

// Recomputation runs in the chunk's scratch arena, which holds the temporaries too until the
// block's backward is done.
void Mla::redo(int slot, Arena& redo, GemmOperand x) {
  Saved& s = saved_[slot];
  s.x = x;
  project_heads(s, redo, redo, s.batch * seq_);
}

void Mla::backward_input(int slot, Arena& arena, const float* dy, float* dx, const Fp8Codes& dy_codes) {
  Saved& s = saved_[slot];
  ParamStore& p = *env_.params;
  const Backend& be = env_.be();
  const int rows = s.batch * seq_, H = heads_, ckv_w = kv_lora_ + rope_, kv_w = nope_ + vdim_;
  s.dy = dy;
  float* dout = arena.floats(size_t(rows) * H * vdim_);
  env_.linear_backward_input(dy, env_.weight(wo), rows, H * vdim_, d_, dout, false, dy_codes);
  s.dq = arena.floats(size_t(rows) * H * qk_);
  float* dk = arena.floats(size_t(rows) * H * qk_);
  s.dkv = arena.floats(size_t(rows) * H * kv_w);
  s.dckv = arena.floats(size_t(rows) * ckv_w);
  // The values' gradients go straight to their place in the W_kv_b output's gradient.
  be.attention_backward({.batch = s.batch, .seq = seq_, .heads = H, .qk_dim = qk_, .v_dim = vdim_,
                         .scale = scale_, .q = s.q.f32, .k = s.k.f32, .v = s.v.f32,
                         .out = s.o, .lse = s.lse, .dout = dout, .dq = s.dq, .dk = dk, .dv = s.dkv + nope_,
                         .inputs = env_.gemm_inputs, .q_bf16 = s.q.bf16, .k_bf16 = s.k.bf16, .v_bf16 = s.v.bf16,
                         .dv_at = {.row = H * kv_w, .head = kv_w}});
  be.rope(query_rope(rows, s.dq, true));

  // The keys' own features back to the W_kv_b output, and the shared RoPE key summed over heads.
  be.copy_columns({.rows = rows, .cols = nope_, .src = dk, .src_stride = H * qk_, .dst = s.dkv,
                   .dst_stride = H * kv_w, .groups = H, .src_group = qk_, .dst_group = kv_w});
  be.copy_columns({.rows = rows, .cols = rope_, .src = dk + nope_, .src_stride = H * qk_, .dst = s.dckv + kv_lora_,
                   .dst_stride = ckv_w, .groups = H, .src_group = qk_, .dst_group = 0});
  s.dc_normed = arena.floats(size_t(rows) * kv_lora_);
  env_.linear_backward_input(s.dkv, env_.weight(wkv_b), rows, kv_lora_, H * kv_w, s.dc_normed);
  float* dc = arena.floats(size_t(rows) * kv_lora_);
  be.rmsnorm_backward_input({.rows = rows, .dim = kv_lora_, .dy = s.dc_normed, .x = s.c, .weight = p.value(kv_norm),
                             .rstd = s.c_rstd, .dx = dc});
  copy_block(be, rows, kv_lora_, dc, kv_lora_, 0, s.dckv, ckv_w, 0);
  be.rope(key_rope(rows, s.dckv, true));
  env_.linear_backward_input(s.dckv, env_.weight(wkv_a), rows, d_, ckv_w, dx);

  if (q_lora_ > 0) {
    s.dcq_normed = arena.floats(size_t(rows) * q_lora_);
    s.dcq = arena.floats(size_t(rows) * q_lora_);
    env_.linear_backward_input(s.dq, env_.weight(wq_b), rows, q_lora_, H * qk_, s.dcq_normed);
    be.rmsnorm_backward_input({.rows = rows, .dim = q_lora_, .dy = s.dcq_normed, .x = s.cq,
                               .weight = p.value(q_norm), .rstd = s.cq_rstd, .dx = s.dcq});
    env_.linear_backward_input(s.dcq, env_.weight(wq_a), rows, d_, q_lora_, dx, true);
  } else {
    env_.linear_backward_input(s.dq, env_.weight(wq), rows, d_, H * qk_, dx, true);
  }
}

void Mla::backward_weight(int slot) {
  Saved& s = saved_[slot];
  ParamStore& p = *env_.params;
  const Backend& be = env_.be();
  const int rows = s.batch * seq_, H = heads_, ckv_w = kv_lora_ + rope_, kv_w = nope_ + vdim_;
  env_.linear_backward_weight(s.dy, s.o, rows, H * vdim_, d_, p.grad(wo));
  env_.linear_backward_weight(s.dkv, s.c_normed, rows, kv_lora_, H * kv_w, p.grad(wkv_b));
  be.rmsnorm_backward_weight({.rows = rows, .dim = kv_lora_, .dy = s.dc_normed, .x = s.c, .rstd = s.c_rstd,
                              .dweight = p.grad(kv_norm)});
  env_.linear_backward_weight(s.dckv, s.x, rows, d_, ckv_w, p.grad(wkv_a));
  if (q_lora_ > 0) {
    env_.linear_backward_weight(s.dq, s.cq_normed, rows, q_lora_, H * qk_, p.grad(wq_b));
    be.rmsnorm_backward_weight({.rows = rows, .dim = q_lora_, .dy = s.dcq_normed, .x = s.cq, .rstd = s.cq_rstd,
                                .dweight = p.grad(q_norm)});
    env_.linear_backward_weight(s.dcq, s.x, rows, d_, q_lora_, p.grad(wq_a));
  } else {
    env_.linear_backward_weight(s.dq, s.x, rows, d_, H * qk_, p.grad(wq));
  }
}

}  // namespace mt
