#pragma once
// Arguments of the routing ops: the router's choice of experts and gates, its backward, the
// balance-loss statistics and the bias update. Included by ops/op_list.hpp.
#include <cstddef>

namespace mt {

// y = 1 / (1 + exp(-x)) over n values; x and y may be the same buffer.
struct SigmoidArgs { size_t n = 0; const float* x = nullptr; float* y = nullptr; };

// DeepSeek-V3 routing of each token (ops/routing/math.hpp has the per-token rule): experts are
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

// Balance loss over consecutive groups of `group` tokens (a sequence or a micro-batch), report
// eqs. 17-20: f[g,i] = E / (K group) * (tokens of group g routed to i) and P[g,i] = the group's
// mean of s_ti / sum_j s_tj. Writes f (the backward pass needs it) and adds
// weight * alpha * sum over groups and experts of f P to *sum (device memory; null: not summed).
struct BalanceLossArgs {
  int tokens = 0, experts = 0, top_k = 0, group = 0;
  float alpha = 0;
  const float* scores = nullptr; const int* chosen = nullptr;
  double* f = nullptr;  // [tokens / group, experts] out
  double weight = 1.0;
  double* sum = nullptr;
};
// prob_sum[i] += sum over tokens of s_ti / sum_j s_tj: a global-batch balance loss's share of
// one micro-batch.
struct BalanceProbSumsArgs {
  int tokens = 0, experts = 0;
  const float* scores = nullptr;
  double* prob_sum = nullptr;  // [experts]
};
// The global-batch balance loss once the step's statistics are in: f[i] = E / (K tokens) * load[i];
// adds alpha * sum_i f[i] prob_sum[i] / tokens to *sum (device memory).
struct GlobalBalanceArgs {
  int experts = 0, top_k = 0;
  long tokens = 0;
  float alpha = 0;
  const double* load = nullptr; const double* prob_sum = nullptr;
  double* f = nullptr;  // [experts] out
  double* sum = nullptr;
};

// Gradient of the router logits (before the sigmoid) from the gates' gradient and the balance
// loss (ops/routing/math.hpp has the per-token formulas). The balance term uses the f of the
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
// load, -= gamma where above. `guard` (device memory, optional): the step's two checks (the squared
// gradient norm and the loss check, optimizer/args.hpp); unless both are finite nothing moves.
struct BiasUpdateArgs {
  int experts = 0;
  float gamma = 0;
  const double* load = nullptr;
  float* bias = nullptr;
  const double* guard = nullptr;
};

}  // namespace mt
