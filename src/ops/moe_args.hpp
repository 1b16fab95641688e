#pragma once
// Arguments of the MoE ops: routing, the grouping of (token, expert) rows by expert, the gated
// combine, the balance-loss statistics and the bias update. Included by ops/ops.hpp.
#include <cstddef>

#include "ops/fp8.hpp"

namespace mt {

// y = 1 / (1 + exp(-x)) over n values; x and y may be the same buffer.
struct SigmoidArgs { size_t n = 0; const float* x = nullptr; float* y = nullptr; };

// DeepSeek-V3 routing of each token (ops/routing_math.hpp has the per-token rule): experts are
// chosen by score + bias (the bias steers selection only), within the topk_groups best groups
// when n_groups > 1; gates are route_scale * score / (sum of the chosen scores).
struct RouterSelectArgs {
  int tokens = 0, experts = 0, top_k = 0, n_groups = 1, topk_groups = 1;
  float route_scale = 1.0f;
  const float* scores = nullptr;  // [tokens, experts] sigmoid affinities
  const float* bias = nullptr;    // [experts]
  int* chosen = nullptr;          // [tokens, top_k] out
  float* gates = nullptr;         // [tokens, top_k] out
};

// Groups the (token, k) pairs by expert; within an expert the tokens keep their order (a stable
// counting sort), so the permutation does not depend on the device.
struct MoePermuteArgs {
  int tokens = 0, top_k = 0, experts = 0;
  const int* chosen = nullptr;  // [tokens, top_k]
  int* expert_begin = nullptr;  // [experts + 1] out: expert e owns permuted rows [begin[e], begin[e+1])
  int* perm_token = nullptr;    // [tokens * top_k] out: the token of each permuted row
  int* slot_row = nullptr;      // [tokens * top_k] out: the permuted row of (token, k)
  double* load = nullptr;       // [experts] += rows routed to each expert; may be null
};

// dst[r, :] = src[index[r], :] for r < rows, `cols` values a row.
// Rows in bfloat16 (bf16 activations): src_bf16 in place of src, dst_bf16 in place of dst; an
// fp32 source into a bfloat16 destination is rounded.
struct GatherRowsArgs {
  int rows = 0, cols = 0;
  const float* src = nullptr; const int* index = nullptr;
  float* dst = nullptr;
  const Bf16* src_bf16 = nullptr;
  Bf16* dst_bf16 = nullptr;
};

// y[t] += sum over k of gate[t,k] * rows[slot_row[t,k]], added in k order (gate 1 when gates is
// null: the backward pass's sum of a token's input gradients).
struct MoeCombineArgs {
  int tokens = 0, top_k = 0, dim = 0;
  const float* rows = nullptr; const int* slot_row = nullptr; const float* gates = nullptr;
  float* y = nullptr;
};
// The combine's backward: drows[slot_row[t,k]] = gate[t,k] * dy[t], dgate[t,k] = dy[t] . rows[slot_row[t,k]].
struct MoeCombineBackwardArgs {
  int tokens = 0, top_k = 0, dim = 0;
  const float* dy = nullptr; const float* rows = nullptr; const int* slot_row = nullptr;
  const float* gates = nullptr;
  float* drows = nullptr;  // [tokens * top_k, dim] out, permuted order
  float* dgate = nullptr;  // [tokens, top_k] out
};

// Balance loss over consecutive groups of `group` tokens (a sequence or a micro-batch), report
// eqs. 17-20: f[g,i] = E / (K group) * (tokens of group g routed to i) and P[g,i] = the group's
// mean of s_ti / sum_j s_tj. Writes f (the backward pass needs it) and returns
// alpha * sum over groups and experts of f P.
struct BalanceLossArgs {
  int tokens = 0, experts = 0, top_k = 0, group = 0;
  float alpha = 0;
  const float* scores = nullptr; const int* chosen = nullptr;
  double* f = nullptr;  // [tokens / group, experts] out
};
// prob_sum[i] += sum over tokens of s_ti / sum_j s_tj: a global-batch balance loss's share of
// one micro-batch.
struct BalanceProbSumsArgs {
  int tokens = 0, experts = 0;
  const float* scores = nullptr;
  double* prob_sum = nullptr;  // [experts]
};
// The global-batch balance loss once the step's statistics are in: f[i] = E / (K tokens) * load[i];
// returns alpha * sum_i f[i] prob_sum[i] / tokens.
struct GlobalBalanceArgs {
  int experts = 0, top_k = 0;
  long tokens = 0;
  float alpha = 0;
  const double* load = nullptr; const double* prob_sum = nullptr;
  double* f = nullptr;  // [experts] out
};

// Gradient of the router logits (before the sigmoid) from the gates' gradient and the balance
// loss (ops/routing_math.hpp has the per-token formulas). The balance term uses the f of the
// token's group, f + (t / group) * f_stride (f_stride 0: one f for every token), scaled by coef;
// f null: no balance loss.
struct RouterBackwardArgs {
  int tokens = 0, experts = 0, top_k = 0;
  float route_scale = 1.0f;
  const float* scores = nullptr; const int* chosen = nullptr; const float* gates = nullptr;
  const float* dgate = nullptr;  // [tokens, top_k]
  const double* f = nullptr;
  int group = 0, f_stride = 0;
  double coef = 0;
  float* dlogits = nullptr;  // [tokens, experts] out
};

// Auxiliary-loss-free balancing after a step: bias[i] += gamma where load[i] is below the mean
// load, -= gamma where above.
struct BiasUpdateArgs {
  int experts = 0;
  float gamma = 0;
  const double* load = nullptr;
  float* bias = nullptr;
};

// Rows in FP8 for the expert-parallel dispatch: each row of `cols` values becomes its codes
// (cols bytes, padded to whole floats) followed by one scale per 1 x `tile` piece, packed into
// fp8_packed_row_floats() floats, so the all-to-all moves about a quarter of the fp32 bytes.
// Unpacking writes the values the codes stand for (codes times scales).
struct Fp8PackRowsArgs {
  int rows = 0, cols = 0, tile = 128;
  Fp8Format format = Fp8Format::e4m3;
  bool pow2_scales = true;
  const float* x = nullptr;  // [rows, cols]
  float* packed = nullptr;   // [rows, fp8_packed_row_floats(cols, tile)]
};
struct Fp8UnpackRowsArgs {
  int rows = 0, cols = 0, tile = 128;
  Fp8Format format = Fp8Format::e4m3;
  const float* packed = nullptr;
  float* x = nullptr;  // [rows, cols] out
};
MT_HD inline int fp8_packed_row_floats(int cols, int tile) { return (cols + 3) / 4 + (cols + tile - 1) / tile; }

// Multi-token prediction's inputs at depth `shift`: position r takes token and target r + shift
// of its sequence, or token 0 and target -1 (no loss) past the sequence's end.
struct ShiftTokensArgs {
  int rows = 0, seq = 0, shift = 0;
  const int* tokens = nullptr; const int* targets = nullptr;
  int* tokens_out = nullptr; int* targets_out = nullptr;
};

}  // namespace mt
