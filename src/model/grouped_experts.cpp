#include "model/grouped_experts.hpp"

namespace mt {

namespace {
// Room for the FP8 codes of values [rows, cols] that a grouped GEMM reads as its A (none where
// LayerEnv::fp8_row_codes gives none): the bound's rows, and kFp8PadOuter - 1 more, which the last
// group's GEMM on a GPU reads past the rows when it pads its own (their products are dropped).
Fp8RowCodes code_room(const LayerEnv& env, Arena& arena, const ExpertRows& rows, int cols, Fp8Operand kind) {
  if (rows.bound == 0) return {};
  return env.fp8_row_codes(arena, rows.bound + kFp8PadOuter - 1, cols, kind);
}
Fp8Codes codes_of(const Fp8RowCodes& q) { return {q.codes, q.scales, q.ld}; }

// out[rows, n_out] = x[rows, n_in] W_g^T for each group's rows; W: [groups, n_out, n_in]. The output
// in fp32 (out) or, with bf16 inputs, in bfloat16 (out_bf16: the fp32 sums rounded once as stored).
// Under fp8 inputs x.fp8 holds x's codes when its producer wrote them.
void grouped_linear_forward(const LayerEnv& env, const GroupedExpertWeights& w, const ExpertRows& rows, GemmOperand x,
                            WeightOperand weights, int n_in, int n_out, float* out, Bf16* out_bf16 = nullptr) {
  const PreparedOperand p = env.prepared(weights, false);
  env.be().grouped_gemm({.groups = w.groups, .offsets = rows.offsets, .ragged = Ragged::rows, .m = rows.count,
                         .n = n_out, .k = n_in, .a = x.f32, .b = weights.f32, .trans_b = true, .c = out,
                         .inputs = env.gemm_inputs, .fp8 = env.fp8_operands(Fp8Operand::activation, Fp8Operand::weight),
                         .a_bf16 = x.bf16, .b_bf16 = p.bf16, .fp8_b = p.fp8, .c_bf16 = out_bf16,
                         .fp8_a = env.gemm_inputs == GemmPrecision::fp8 ? x.fp8 : Fp8Codes{}});
}
// dx[rows, n_in] (= or +=) dy[rows, n_out] W_g; dy_codes: dy's FP8 codes written by its producer.
void grouped_linear_backward_input(const LayerEnv& env, const GroupedExpertWeights& w, const ExpertRows& rows,
                                   const float* dy, WeightOperand weights, int n_in, int n_out, float* dx,
                                   bool accumulate, Fp8Codes dy_codes = {}, Bf16* dx_bf16 = nullptr) {
  const PreparedOperand p = env.prepared(weights, true);
  env.be().grouped_gemm({.groups = w.groups, .offsets = rows.offsets, .ragged = Ragged::rows, .m = rows.count,
                         .n = n_in, .k = n_out, .a = dy, .b = weights.f32, .trans_b = false, .c = dx,
                         .beta = accumulate ? 1.0f : 0.0f, .inputs = env.gemm_inputs,
                         .fp8 = env.fp8_operands(Fp8Operand::gradient, Fp8Operand::weight), .b_bf16 = p.bf16,
                         .fp8_b = p.fp8, .c_bf16 = dx_bf16,
                         .fp8_a = env.gemm_inputs == GemmPrecision::fp8 ? dy_codes : Fp8Codes{}});
}
// dW_g[n_out, n_in] += dy_g^T x_g.
void grouped_linear_backward_weight(const LayerEnv& env, const GroupedExpertWeights& w, const ExpertRows& rows,
                                    const float* dy, GemmOperand x, int n_in, int n_out, float* dw) {
  env.be().grouped_gemm({.groups = w.groups, .offsets = rows.offsets, .ragged = Ragged::reduce, .m = n_out,
                         .n = n_in, .k = rows.count, .a = dy, .b = x.f32, .c = dw, .beta = 1.0f,
                         .inputs = env.gemm_inputs,
                         .fp8 = env.fp8_operands(Fp8Operand::gradient, Fp8Operand::activation), .b_bf16 = x.bf16});
}
}  // namespace

void grouped_experts_forward(const LayerEnv& env, Arena& arena, Arena& redo, const GroupedExpertWeights& w,
                             const ExpertRows& rows, GemmOperand x, float* y, GroupedExpertsSaved& s) {
  const size_t room = size_t(rows.bound) * w.hidden;
  s.rows = rows;
  s.x = x;
  if (env.bf16_outputs) {
    s.a_bf16 = arena.bf16s(room);
    s.b_bf16 = arena.bf16s(room);
  } else {
    s.a = arena.floats(room);
    s.b = arena.floats(room);
  }
  grouped_linear_forward(env, w, rows, x, w.gate, w.dim, w.hidden, s.a, s.a_bf16);
  grouped_linear_forward(env, w, rows, x, w.up, w.dim, w.hidden, s.b, s.b_bf16);
  grouped_experts_redo(env, redo, w, s);
  grouped_linear_forward(env, w, rows, s.h, w.down, w.hidden, w.dim, y);
}

void grouped_experts_redo(const LayerEnv& env, Arena& redo, const GroupedExpertWeights& w, GroupedExpertsSaved& s) {
  // As LayerEnv::swiglu_for_gemms (with the codes the down projection reads under fp8 inputs), with
  // room for the bound's rows.
  const size_t room = size_t(s.rows.bound) * w.hidden;
  SwigluForwardArgs a{.n = size_t(s.rows.count) * w.hidden, .gate = s.a, .up = s.b, .cols = w.hidden,
                      .fp8 = code_room(env, redo, s.rows, w.hidden, Fp8Operand::activation), .gate_bf16 = s.a_bf16,
                      .up_bf16 = s.b_bf16};
  if (env.bf16_activations) s.h = a.h_bf16 = redo.bf16s(room);
  else s.h = a.h = redo.floats(room);
  s.h.fp8 = codes_of(a.fp8);
  env.be().swiglu_forward(a);
}

void grouped_experts_backward_input(const LayerEnv& env, Arena& arena, const GroupedExpertWeights& w,
                                    const float* dy, float* dx, GroupedExpertsSaved& s) {
  const size_t n = size_t(s.rows.count) * w.hidden, room = size_t(s.rows.bound) * w.hidden;
  // The hidden gradient in bfloat16 for SwiGLU's backward, its only reader, as the dense FFN's.
  float* dh = env.bf16_outputs ? nullptr : arena.floats(room);
  Bf16* dh_bf16 = env.bf16_outputs ? arena.bf16s(room) : nullptr;
  s.dy = dy;
  s.da = arena.floats(room);
  s.db = arena.floats(room);
  grouped_linear_backward_input(env, w, s.rows, dy, w.down, w.hidden, w.dim, dh, false, {}, dh_bf16);
  // Under fp8 inputs the gradients' codes come with them, for the input gradients' GEMMs.
  const Fp8RowCodes qa = code_room(env, arena, s.rows, w.hidden, Fp8Operand::gradient);
  const Fp8RowCodes qb = code_room(env, arena, s.rows, w.hidden, Fp8Operand::gradient);
  env.be().swiglu_backward({.n = n, .gate = s.a, .up = s.b, .dh = dh, .dgate = s.da, .dup = s.db, .cols = w.hidden,
                            .dgate_fp8 = qa, .dup_fp8 = qb, .gate_bf16 = s.a_bf16, .up_bf16 = s.b_bf16,
                            .dh_bf16 = dh_bf16});
  grouped_linear_backward_input(env, w, s.rows, s.da, w.gate, w.dim, w.hidden, dx, false, codes_of(qa));
  grouped_linear_backward_input(env, w, s.rows, s.db, w.up, w.dim, w.hidden, dx, true, codes_of(qb));
}

void grouped_experts_backward_weight(const LayerEnv& env, const GroupedExpertWeights& w, const GroupedExpertGrads& g,
                                     const GroupedExpertsSaved& s) {
  if (s.rows.count == 0) return;
  grouped_linear_backward_weight(env, w, s.rows, s.dy, s.h, w.hidden, w.dim, g.down);
  grouped_linear_backward_weight(env, w, s.rows, s.da, s.x, w.dim, w.hidden, g.gate);
  grouped_linear_backward_weight(env, w, s.rows, s.db, s.x, w.dim, w.hidden, g.up);
}

}  // namespace mt
