// Reference MoE routing ops: the router's sigmoid, expert selection, the balance-loss
// statistics, the router's backward pass and the bias update. The per-token rules are in
// ops/routing/math.hpp, shared with the CUDA kernels.
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/backend/cpu_ops.hpp"
#include "ops/optimizer/math.hpp"
#include "ops/routing/math.hpp"

namespace mt::cpu {

void sigmoid(DeviceState*, const SigmoidArgs& a) {
  for (size_t i = 0; i < a.n; ++i) a.y[i] = 1.0f / (1.0f + std::exp(-a.x[i]));
}

void router_select(DeviceState*, const RouterSelectArgs& a) {
  for (int t = 0; t < a.tokens; ++t)
    routing::select_token(a.scores + size_t(t) * a.experts, a.bias, a.experts, a.top_k, a.n_groups, a.topk_groups,
                          a.route_scale, a.chosen + size_t(t) * a.top_k, a.gates + size_t(t) * a.top_k);
}

void router_backward(DeviceState*, const RouterBackwardArgs& a) {
  for (int t = 0; t < a.tokens; ++t) {
    const double* f = a.f ? a.f + size_t(t / a.group) * a.f_stride : nullptr;
    const size_t row = size_t(t) * a.experts, pick = size_t(t) * a.top_k;
    routing::router_backward_token(a.scores + row, a.chosen + pick, a.gates + pick, a.dgate + pick, a.experts,
                                   a.top_k, a.route_scale, f, a.coef, a.dlogits + row);
  }
}

void balance_loss(DeviceState*, const BalanceLossArgs& a) {
  const int E = a.experts;
  double loss = 0;
  for (int begin = 0, g = 0; begin < a.tokens; begin += a.group, ++g) {
    double* f = a.f + size_t(g) * E;
    std::fill(f, f + E, 0.0);
    for (int t = begin; t < begin + a.group; ++t)
      for (int k = 0; k < a.top_k; ++k) f[a.chosen[size_t(t) * a.top_k + k]] += double(E) / (a.top_k * a.group);
    for (int t = begin; t < begin + a.group; ++t) {
      const float* s = a.scores + size_t(t) * E;
      const double total = std::accumulate(s, s + E, 0.0);
      for (int i = 0; i < E; ++i) loss += a.alpha * f[i] * s[i] / total / a.group;
    }
  }
  if (a.sum) *a.sum += a.weight * loss;
}

void balance_prob_sums(DeviceState*, const BalanceProbSumsArgs& a) {
  for (int t = 0; t < a.tokens; ++t) {
    const float* s = a.scores + size_t(t) * a.experts;
    const double total = std::accumulate(s, s + a.experts, 0.0);
    for (int i = 0; i < a.experts; ++i) a.prob_sum[i] += s[i] / total;
  }
}

void global_balance(DeviceState*, const GlobalBalanceArgs& a) {
  double loss = 0;
  for (int i = 0; i < a.experts; ++i) {
    a.f[i] = a.load[i] * a.experts / (double(a.top_k) * a.tokens);
    loss += a.alpha * a.f[i] * a.prob_sum[i] / a.tokens;
  }
  *a.sum += loss;
}

void bias_update(DeviceState*, const BiasUpdateArgs& a) {
  if (!guard_passes(a.guard)) return;
  const double mean = std::accumulate(a.load, a.load + a.experts, 0.0) / a.experts;
  for (int i = 0; i < a.experts; ++i) {
    if (a.load[i] < mean) a.bias[i] += a.gamma;
    else if (a.load[i] > mean) a.bias[i] -= a.gamma;
  }
}

}  // namespace mt::cpu
