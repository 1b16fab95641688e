#include "model/block.hpp"

#include <algorithm>

#include "util/error.hpp"

namespace mt {

Block::Block(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix, bool moe, int max_in_flight)
    : env_(env), d_(cfg.d_model), seq_(cfg.seq_len), eps_(float(cfg.norm_eps)),
      attn_(make_attention(env, cfg, prefix + ".attn", max_in_flight)), saved_(max_in_flight) {
  using I = ParamStore::Init;
  ParamStore& p = *env.params;
  // Under sequence parallelism each rank norms its own rows: a part of the weights' gradient.
  const Spread norms = env.shard.split_rows() ? Spread::tensor_partial : Spread::replicated;
  norm1 = p.add(prefix + ".attn_norm", {d_}, I::ones, false, norms);
  norm2 = p.add(prefix + ".ffn_norm", {d_}, I::ones, false, norms);
  if (!moe) {
    // Hidden units split over the tensor-parallel group: gate and up by rows, down by columns.
    const int64_t H = cfg.ffn_hidden, D = d_;
    const Spread split = Spread::tensor_split;
    ffn_gate = p.add(prefix + ".ffn.w_gate", {H, D}, I::normal, true, split, env.shard.tp_split(0));
    ffn_up = p.add(prefix + ".ffn.w_up", {H, D}, I::normal, true, split, env.shard.tp_split(0));
    ffn_down = p.add(prefix + ".ffn.w_down", {D, H}, I::normal, true, split, env.shard.tp_split(1));
  } else {
    moe_ = std::make_unique<MoE>(env, cfg, prefix + ".moe", max_in_flight);
  }
}

SwigluWeights Block::dense_weights() const {
  ParamStore& p = *env_.params;
  return {env_.weight(ffn_gate), env_.weight(ffn_up), env_.weight(ffn_down), d_, int(p.info(ffn_gate).shape[0])};
}

void Block::forward(int slot, Arena& arena, Arena& redo, Arena& temp, const float* x, int batch, float* y,
                    float aux_grad_scale, double* aux_sum, bool recompute) {
  Saved& s = saved_[slot];
  const int all_rows = batch * seq_, rows = env_.shard.row_share(all_rows);
  const bool split = env_.shard.split_rows();
  const size_t n = size_t(rows) * d_, all = size_t(all_rows) * d_;
  s.rows = rows;
  s.x = x;
  s.rstd1 = arena.floats(rows);
  s.x1 = arena.floats(n);
  s.rstd2 = arena.floats(rows);
  const Backend& be = env_.be();
  // Under sequence parallelism the norms of this rank's rows live only until they are gathered.
  Arena& mine = split ? temp : redo;
  s.n1 = env_.gather_rows(redo, norm(mine, rows, x, norm1, s.rstd1, true), n);
  // The residual add happens in the norm: x1 = attention's output (fp32 in x1, or bfloat16) + x.
  // The MoE also moves the rows to its experts.
  Bf16* attn16 = bf16_residual_reads() ? temp.bf16s(n) : nullptr;
  if (attn16) attn_->forward(slot, arena, redo, temp, s.n1, batch, attn16);
  else {
    float* attn_out = split ? temp.floats(all) : s.x1;
    attn_->forward(slot, arena, redo, temp, s.n1, batch, attn_out);
    env_.tp_sum_rows(attn_out, s.x1, n);
  }
  s.n2 = env_.gather_rows(redo, norm(mine, rows, attn16 ? nullptr : s.x1, norm2, s.rstd2, !moe_, x, s.x1, attn16), n);
  // The MoE's output is fp32: its combine sums the routed experts' fp32 outputs, weighted, onto the shared experts'.
  if (moe_) moe_->forward(slot, arena, redo, s.n2.f32, batch, y, aux_grad_scale, aux_sum, recompute);
  else if (bf16_residual_reads()) {
    Bf16* ffn16 = temp.bf16s(n);
    swiglu_forward(env_, arena, redo, dense_weights(), s.n2, all_rows, ffn16, false, s.ffn);
    return be.add({.n = n, .x = s.x1, .y = y, .y_bf16 = ffn16});
  } else {
    float* ffn_out = split ? temp.floats(all) : y;
    swiglu_forward(env_, arena, redo, dense_weights(), s.n2, all_rows, ffn_out, false, s.ffn);
    env_.tp_sum_rows(ffn_out, y, n);
  }
  be.add({.n = n, .x = s.x1, .y = y});
}

// RMSNorm(x) into `redo`; its rstd (kept: one value per row) is written again, the same. With a
// residual, the rows normed are x + residual, written to `sum`.
GemmOperand Block::norm(Arena& redo, int rows, const float* x, int weight, float* rstd, bool gemms_only,
                      const float* residual, float* sum, const Bf16* x_bf16) {
  RmsNormForwardArgs a{.rows = rows, .dim = d_, .eps = eps_, .x = x, .weight = env_.params->value(weight),
                       .rstd = rstd, .residual = residual, .sum = sum, .x_bf16 = x_bf16};
  if (gemms_only) return env_.rmsnorm_for_gemms(redo, a, !env_.shard.split_rows());
  float* y = a.y = redo.floats(size_t(rows) * d_);
  env_.be().rmsnorm_forward(a);
  return y;
}

void Block::redo(int slot, Arena& redo) {
  Saved& s = saved_[slot];
  const size_t n = size_t(s.rows) * d_;
  s.n1 = env_.gather_rows(redo, norm(redo, s.rows, s.x, norm1, s.rstd1, true), n);
  attn_->redo(slot, redo, s.n1);
  s.n2 = env_.gather_rows(redo, norm(redo, s.rows, s.x1, norm2, s.rstd2, !moe_), n);
  if (moe_) moe_->redo(slot, redo, s.n2.f32);
  else swiglu_redo(env_, redo, dense_weights(), s.n2, s.ffn);
}

bool Block::reads_output_codes() const { return !env_.shard.split_rows() && (!moe_ || moe_->has_shared()); }

void Block::backward_input(int slot, Arena& arena, const float* dy, float* dx, const Fp8RowCodes& dy_codes,
                           const Fp8RowCodes& dx_codes) {
  Saved& s = saved_[slot];
  ParamStore& p = *env_.params;
  const int rows = s.rows;
  const bool split = env_.shard.split_rows();
  const size_t n = size_t(rows) * d_, all = split ? n * env_.shard.tp_size : n;
  const Backend& be = env_.be();
  s.dy = dy;
  s.dn2 = arena.floats(n);
  s.dx1 = arena.floats(n);
  s.dn1 = arena.floats(n);
  // Under sequence parallelism the FFN and attention take every row's gradient and give back
  // their part of every row's, summed onto this rank's rows. Otherwise, under fp8 inputs, the
  // residual stream's gradients come with their FP8 codes for the down and output projections' Dgrad.
  MT_CHECK(!split || (!dy_codes.codes && !dx_codes.codes));  // the gathered rows have none
  const Fp8Codes dy_q{dy_codes.codes, dy_codes.scales, dy_codes.ld};
  if (moe_) moe_->backward_input(slot, arena, dy, s.dn2, dy_q);
  else {
    float* dn2_all = split ? arena.floats(all) : s.dn2;
    swiglu_backward_input(env_, arena, dense_weights(), env_.gather_rows(arena, dy, n), dn2_all, false, s.ffn, dy_q);
    env_.tp_sum_rows(dn2_all, s.dn2, n);
  }
  const Fp8RowCodes dx1_q = split ? Fp8RowCodes{} : env_.fp8_row_codes(arena, rows, d_, Fp8Operand::gradient);
  be.rmsnorm_backward_input({.rows = rows, .dim = d_, .dy = s.dn2, .x = s.x1, .weight = p.value(norm2),
                             .rstd = s.rstd2, .dx = s.dx1, .residual_grad = dy, .fp8 = dx1_q});
  float* dn1_all = split ? arena.floats(all) : s.dn1;
  const Fp8Codes dx1_codes{dx1_q.codes, dx1_q.scales, dx1_q.ld};
  attn_->backward_input(slot, arena, env_.gather_rows(arena, s.dx1, n), dn1_all, dx1_codes);
  env_.tp_sum_rows(dn1_all, s.dn1, n);
  be.rmsnorm_backward_input({.rows = rows, .dim = d_, .dy = s.dn1, .x = s.x, .weight = p.value(norm1),
                             .rstd = s.rstd1, .dx = dx, .residual_grad = s.dx1, .fp8 = dx_codes});
}

void Block::backward_weight(int slot) {
  Saved& s = saved_[slot];
  ParamStore& p = *env_.params;
  const Backend& be = env_.be();
  be.rmsnorm_backward_weight(
      {.rows = s.rows, .dim = d_, .dy = s.dn2, .x = s.x1, .rstd = s.rstd2, .dweight = p.grad(norm2)});
  be.rmsnorm_backward_weight(
      {.rows = s.rows, .dim = d_, .dy = s.dn1, .x = s.x, .rstd = s.rstd1, .dweight = p.grad(norm1)});
  attn_->backward_weight(slot);
  if (moe_) moe_->backward_weight(slot);
  else swiglu_backward_weight(env_, dense_weights(), {p.grad(ffn_gate), p.grad(ffn_up), p.grad(ffn_down)}, s.ffn);
}

}  // namespace mt
