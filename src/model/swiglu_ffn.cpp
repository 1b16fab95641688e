#include "model/swiglu_ffn.hpp"

namespace mt {

void swiglu_forward(const LayerEnv& env, Arena& arena, Arena& redo, const SwigluWeights& w, GemmOperand x, int rows,
                    LayerOutput y, bool accumulate, SwigluSaved& s) {
  const size_t n = size_t(rows) * w.hidden;
  s.rows = rows;
  if (env.bf16_outputs) {
    s.a_bf16 = arena.bf16s(n);
    s.b_bf16 = arena.bf16s(n);
    env.linear_forward(x, w.gate, rows, w.dim, w.hidden, s.a_bf16);
    env.linear_forward(x, w.up, rows, w.dim, w.hidden, s.b_bf16);
  } else {
    s.a = arena.floats(n);
    s.b = arena.floats(n);
    env.linear_forward(x, w.gate, rows, w.dim, w.hidden, s.a);
    env.linear_forward(x, w.up, rows, w.dim, w.hidden, s.b);
  }
  swiglu_redo(env, redo, w, x, s);
  env.linear_forward(s.h, w.down, rows, w.hidden, w.dim, y, accumulate);
}

void swiglu_redo(const LayerEnv& env, Arena& redo, const SwigluWeights& w, GemmOperand x, SwigluSaved& s) {
  s.x = x;
  s.h = env.swiglu_for_gemms(redo, s.rows, w.hidden, s.a, s.b, s.a_bf16, s.b_bf16);
}

void swiglu_backward_input(const LayerEnv& env, Arena& arena, const SwigluWeights& w, const float* dy,
                           float* dx, bool accumulate, SwigluSaved& s, const Fp8Codes& dy_codes) {
  const size_t n = size_t(s.rows) * w.hidden;
  float* dh = nullptr;
  Bf16* dh_bf16 = nullptr;
  if (env.bf16_outputs) {
    dh_bf16 = arena.bf16s(n);
    env.linear_backward_input(dy, w.down, s.rows, w.hidden, w.dim, dh_bf16);
  } else {
    dh = arena.floats(n);
    env.linear_backward_input(dy, w.down, s.rows, w.hidden, w.dim, dh, false, dy_codes);
  }
  s.dy = dy;
  s.da = arena.floats(n);
  s.db = arena.floats(n);
  // Under fp8 inputs the gradients' codes come with them, for the input gradients' GEMMs.
  const Fp8RowCodes qa = env.fp8_row_codes(arena, s.rows, w.hidden, Fp8Operand::gradient);
  const Fp8RowCodes qb = env.fp8_row_codes(arena, s.rows, w.hidden, Fp8Operand::gradient);
  env.be().swiglu_backward({.n = n, .gate = s.a, .up = s.b, .dh = dh, .dgate = s.da, .dup = s.db, .cols = w.hidden,
                            .dgate_fp8 = qa, .dup_fp8 = qb, .gate_bf16 = s.a_bf16, .up_bf16 = s.b_bf16,
                            .dh_bf16 = dh_bf16});
  env.linear_backward_input(s.da, w.gate, s.rows, w.dim, w.hidden, dx, accumulate, {qa.codes, qa.scales, qa.ld});
  env.linear_backward_input(s.db, w.up, s.rows, w.dim, w.hidden, dx, true, {qb.codes, qb.scales, qb.ld});
}

void swiglu_backward_weight(const LayerEnv& env, const SwigluWeights& w, const SwigluGrads& g,
                            const SwigluSaved& s) {
  if (s.rows == 0) return;
  env.linear_backward_weight(s.dy, s.h, s.rows, w.hidden, w.dim, g.down);
  env.linear_backward_weight(s.da, s.x, s.rows, w.dim, w.hidden, g.gate);
  env.linear_backward_weight(s.db, s.x, s.rows, w.dim, w.hidden, g.up);
}

}  // namespace mt
