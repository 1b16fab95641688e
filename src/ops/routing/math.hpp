#pragma once
// The per-token rules of DeepSeek-V3 routing, shared by the CPU reference and the CUDA kernels
// (one token per thread there), so both choose the same experts bit for bit.
#include <cmath>

#include "ops/host_device.hpp"

namespace mt::routing {

// Groups ranked by the sum of their two best biased scores (one expert a group: its best).
MT_HD inline float group_score(const float* scores, const float* bias, int first, int size) {
  float best = -INFINITY, second = -INFINITY;
  for (int i = first; i < first + size; ++i) {
    const float b = scores[i] + bias[i];
    if (b > best) { second = best; best = b; }
    else if (b > second) second = b;
  }
  return best + (size > 1 ? second : 0.0f);
}

// Chooses top_k experts for one token and their gates. Ties go to the lower index, for groups
// and for experts, so the choice never depends on the order of evaluation. n_groups <= 64.
MT_HD inline void select_token(const float* scores, const float* bias, int experts, int top_k, int n_groups,
                               int topk_groups, float route_scale, int* chosen, float* gates) {
  const int per_group = experts / n_groups;
  unsigned long long eligible = ~0ull;
  if (n_groups > 1) {
    eligible = 0;
    for (int pick = 0; pick < topk_groups; ++pick) {
      int best = -1;
      float best_score = -INFINITY;
      for (int g = 0; g < n_groups; ++g) {
        if (eligible >> g & 1ull) continue;
        const float s = group_score(scores, bias, g * per_group, per_group);
        if (best < 0 || s > best_score) { best = g; best_score = s; }
      }
      eligible |= 1ull << best;
    }
  }
  double sum = 0;
  for (int k = 0; k < top_k; ++k) {
    int best = -1;
    float best_value = -INFINITY;
    for (int i = 0; i < experts; ++i) {
      if (!(eligible >> (i / per_group) & 1ull)) continue;
      bool taken = false;
      for (int j = 0; j < k; ++j) taken = taken || chosen[j] == i;
      if (taken) continue;
      const float b = scores[i] + bias[i];
      if (best < 0 || b > best_value) { best = i; best_value = b; }
    }
    chosen[k] = best;
    sum += scores[best];
  }
  for (int k = 0; k < top_k; ++k) gates[k] = float(route_scale * scores[chosen[k]] / sum);
}

// d(logits) of one token. Gates g_k = c s_k / S over the chosen experts (S their score sum) give
// ds_k = (c dg_k - sum_j dg_j g_j) / S; the balance loss coef * sum_i f_i s_i / T (T = sum_i s_i)
// adds coef (f_i / T - sum_j f_j s_j / T^2) to every expert; then ds passes the sigmoid.
MT_HD inline void router_backward_token(const float* scores, const int* chosen, const float* gates, const float* dgate,
                                        int experts, int top_k, float route_scale, const double* f, double coef,
                                        float* dlogits) {
  double S = 0, weighted = 0;
  for (int k = 0; k < top_k; ++k) {
    S += scores[chosen[k]];
    weighted += double(dgate[k]) * gates[k];
  }
  double total = 0, fs = 0;
  if (f)
    for (int i = 0; i < experts; ++i) { total += scores[i]; fs += f[i] * scores[i]; }
  for (int i = 0; i < experts; ++i) {
    float ds = 0.0f;
    for (int k = 0; k < top_k; ++k)
      if (chosen[k] == i) ds += float((route_scale * dgate[k] - weighted) / S);
    if (f) ds += float(coef * (f[i] / total - fs / (total * total)));
    dlogits[i] = ds * scores[i] * (1.0f - scores[i]);
  }
}

}  // namespace mt::routing
