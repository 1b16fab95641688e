#include "model/grouped_experts.hpp"

namespace mt {

namespace {
// out[rows, n_out] (= or +=) x[rows, n_in] W_g^T for each group's rows; W: [groups, n_out, n_in].
void grouped_linear_forward(const LayerEnv& env, const GroupedExpertWeights& w, const int* offsets, int rows,
                            GemmOperand x, WeightOperand weights, int n_in, int n_out, float* out, bool accumulate) {
  const PreparedOperand p = env.prepared(weights, false);
  env.be().grouped_gemm({.groups = w.groups, .offsets = offsets, .ragged = Ragged::rows, .m = rows, .n = n_out,
                         .k = n_in, .a = x.f32, .b = weights.f32, .trans_b = true, .c = out,
                         .beta = accumulate ? 1.0f : 0.0f, .inputs = env.gemm_inputs,
                         .fp8 = env.fp8_operands(Fp8Operand::activation, Fp8Operand::weight), .a_bf16 = x.bf16,
                         .b_bf16 = p.bf16, .fp8_b = p.fp8});
}
// dx[rows, n_in] (= or +=) dy[rows, n_out] W_g.
void grouped_linear_backward_input(const LayerEnv& env, const GroupedExpertWeights& w, const int* offsets, int rows,
                                   const float* dy, WeightOperand weights, int n_in, int n_out, float* dx,
                                   bool accumulate) {
  const PreparedOperand p = env.prepared(weights, true);
  env.be().grouped_gemm({.groups = w.groups, .offsets = offsets, .ragged = Ragged::rows, .m = rows, .n = n_in,
                         .k = n_out, .a = dy, .b = weights.f32, .trans_b = false, .c = dx,
                         .beta = accumulate ? 1.0f : 0.0f, .inputs = env.gemm_inputs,
                         .fp8 = env.fp8_operands(Fp8Operand::gradient, Fp8Operand::weight), .b_bf16 = p.bf16,
                         .fp8_b = p.fp8});
}
// dW_g[n_out, n_in] += dy_g^T x_g.
void grouped_linear_backward_weight(const LayerEnv& env, const GroupedExpertWeights& w, const int* offsets, int rows,
                                    const float* dy, GemmOperand x, int n_in, int n_out, float* dw) {
  env.be().grouped_gemm({.groups = w.groups, .offsets = offsets, .ragged = Ragged::reduce, .m = n_out, .n = n_in,
                         .k = rows, .a = dy, .b = x.f32, .c = dw, .beta = 1.0f, .inputs = env.gemm_inputs,
                         .fp8 = env.fp8_operands(Fp8Operand::gradient, Fp8Operand::activation), .b_bf16 = x.bf16});
}
}  // namespace

void grouped_experts_forward(const LayerEnv& env, Arena& arena, Arena& redo, const GroupedExpertWeights& w,
                             const int* offsets, GemmOperand x, int rows, float* y, GroupedExpertsSaved& s) {
  const size_t n = size_t(rows) * w.hidden;
  s.rows = rows;
  s.offsets = offsets;
  s.x = x;
  s.a = arena.floats(n);
  s.b = arena.floats(n);
  grouped_linear_forward(env, w, offsets, rows, x, w.gate, w.dim, w.hidden, s.a, false);
  grouped_linear_forward(env, w, offsets, rows, x, w.up, w.dim, w.hidden, s.b, false);
  grouped_experts_redo(env, redo, w, s);
  grouped_linear_forward(env, w, offsets, rows, s.h, w.down, w.hidden, w.dim, y, false);
}

void grouped_experts_redo(const LayerEnv& env, Arena& redo, const GroupedExpertWeights& w, GroupedExpertsSaved& s) {
  s.h = env.swiglu_for_gemms(redo, size_t(s.rows) * w.hidden, s.a, s.b);
}

void grouped_experts_backward_input(const LayerEnv& env, Arena& arena, const GroupedExpertWeights& w,
                                    const float* dy, float* dx, GroupedExpertsSaved& s) {
  const size_t n = size_t(s.rows) * w.hidden;
  float* dh = arena.floats(n);
  s.dy = dy;
  s.da = arena.floats(n);
  s.db = arena.floats(n);
  grouped_linear_backward_input(env, w, s.offsets, s.rows, dy, w.down, w.hidden, w.dim, dh, false);
  env.be().swiglu_backward({.n = n, .gate = s.a, .up = s.b, .dh = dh, .dgate = s.da, .dup = s.db});
  grouped_linear_backward_input(env, w, s.offsets, s.rows, s.da, w.gate, w.dim, w.hidden, dx, false);
  grouped_linear_backward_input(env, w, s.offsets, s.rows, s.db, w.up, w.dim, w.hidden, dx, true);
}

void grouped_experts_backward_weight(const LayerEnv& env, const GroupedExpertWeights& w, const GroupedExpertGrads& g,
                                     const GroupedExpertsSaved& s) {
  if (s.rows == 0) return;
  grouped_linear_backward_weight(env, w, s.offsets, s.rows, s.dy, s.h, w.hidden, w.dim, g.down);
  grouped_linear_backward_weight(env, w, s.offsets, s.rows, s.da, s.x, w.dim, w.hidden, g.gate);
  grouped_linear_backward_weight(env, w, s.offsets, s.rows, s.db, s.x, w.dim, w.hidden, g.up);
}

}  // namespace mt
