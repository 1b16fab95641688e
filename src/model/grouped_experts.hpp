#pragma once
// The routed experts of a layer as one grouped SwiGLU over rows grouped by expert:
// y[rows of g] = W_down,g (silu(W_gate,g x) * (W_up,g x)). Each projection is one grouped GEMM
// for all the experts (ops.hpp: grouped_gemm), however the rows are spread over them.
#include "model/layer_env.hpp"

namespace mt {

struct GroupedExpertWeights {
  WeightOperand gate;  // [groups, hidden, dim]
  WeightOperand up;    // [groups, hidden, dim]
  WeightOperand down;  // [groups, dim, hidden]
  int groups = 0, dim = 0, hidden = 0;
};
struct GroupedExpertGrads { float* gate = nullptr; float* up = nullptr; float* down = nullptr; };

// The rows the experts compute on: `offsets` ([groups + 1], device memory) delimit each expert's,
// `count` in all (the host knows it: the routed pairs, or what the exchange of counts announced).
// Buffers sized by rows take room for `bound` of them, the most that can arrive, so the arena's
// layout does not follow the routing.
struct ExpertRows {
  const int* offsets = nullptr;
  int count = 0, bound = 0;
};

// What one micro-batch keeps between the passes (device pointers).
struct GroupedExpertsSaved {
  ExpertRows rows;
  GemmOperand x;
  float *a = nullptr, *b = nullptr;  // gate and up pre-activations
  // The same in bfloat16 in place of a, b under LayerEnv::bf16_outputs, as SwigluSaved keeps them.
  Bf16 *a_bf16 = nullptr, *b_bf16 = nullptr;
  GemmOperand h;                       // their product (bfloat16 under LayerEnv::bf16_activations)
  const float* dy = nullptr;
  float *da = nullptr, *db = nullptr;
};

// y[rows.count, dim] = the experts applied to their rows of x; the products h go to `redo` (see
// swiglu_forward).
void grouped_experts_forward(const LayerEnv& env, Arena& arena, Arena& redo, const GroupedExpertWeights& w,
                             const ExpertRows& rows, GemmOperand x, float* y, GroupedExpertsSaved& s);
// Selective recomputation: h again, in `redo`.
void grouped_experts_redo(const LayerEnv& env, Arena& redo, const GroupedExpertWeights& w, GroupedExpertsSaved& s);
// dx[rows.count, dim] from dy; keeps what the weight gradients need.
void grouped_experts_backward_input(const LayerEnv& env, Arena& arena, const GroupedExpertWeights& w,
                                    const float* dy, float* dx, GroupedExpertsSaved& s);
void grouped_experts_backward_weight(const LayerEnv& env, const GroupedExpertWeights& w, const GroupedExpertGrads& g,
                                     const GroupedExpertsSaved& s);

}  // namespace mt
