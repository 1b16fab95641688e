#pragma once
// SwiGLU feed-forward y = W_down (silu(W_gate x) * (W_up x)) on raw weight pointers, so the
// dense FFN, the shared experts and every routed expert share one implementation.
#include "model/layer_env.hpp"

namespace mt {

struct SwigluWeights {
  WeightOperand gate;  // [hidden, dim]
  WeightOperand up;    // [hidden, dim]
  WeightOperand down;  // [dim, hidden]
  int dim = 0, hidden = 0;
};
struct SwigluGrads { float* gate = nullptr; float* up = nullptr; float* down = nullptr; };

// What one micro-batch keeps between forward, backward_input and backward_weight.
struct SwigluSaved {
  int rows = 0;
  GemmOperand x;
  float *a = nullptr, *b = nullptr;  // gate and up pre-activations
  // The same in bfloat16 in place of a, b under LayerEnv::bf16_outputs: the gate and up GEMMs
  // write them so, and SwiGLU reads them in both passes (half their memory, kept to the backward).
  Bf16 *a_bf16 = nullptr, *b_bf16 = nullptr;
  GemmOperand h;                       // their product (bfloat16 under LayerEnv::bf16_activations)
  const float* dy = nullptr;
  float *da = nullptr, *db = nullptr;                  // for the weight gradients
};

// y[rows,dim] (= or += when accumulate) FFN(x); a bfloat16 y is written by the down projection
// (not accumulated). The product h goes to `redo`, the arena of what selective recomputation drops
// (the same arena as `arena` without it).
void swiglu_forward(const LayerEnv& env, Arena& arena, Arena& redo, const SwigluWeights& w, GemmOperand x, int rows,
                    LayerOutput y, bool accumulate, SwigluSaved& s);
// Selective recomputation: h again, in `redo`, from the kept pre-activations; x is the input's
// recomputed copy.
void swiglu_redo(const LayerEnv& env, Arena& redo, const SwigluWeights& w, GemmOperand x, SwigluSaved& s);
// dx[rows,dim] (= or +=) from dy; keeps dy and the pre-activation gradients in s. dy_codes: dy's
// FP8 codes written by its producer (codes null: none), for the down projection's Dgrad. Under
// LayerEnv::bf16_outputs that Dgrad writes h's gradient in bfloat16, which only SwiGLU's backward reads.
void swiglu_backward_input(const LayerEnv& env, Arena& arena, const SwigluWeights& w, const float* dy,
                           float* dx, bool accumulate, SwigluSaved& s, const Fp8Codes& dy_codes = {});
void swiglu_backward_weight(const LayerEnv& env, const SwigluWeights& w, const SwigluGrads& g,
                            const SwigluSaved& s);

}  // namespace mt
