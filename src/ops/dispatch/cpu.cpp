// Reference ops that move token rows: grouping (token, expert) pairs by expert, ordering the rows
// an expert-parallel rank receives, gathering rows, the gated combine and its backward pass, and
// multi-token prediction's shifted tokens.
#include <algorithm>
#include <vector>

#include "ops/bf16.hpp"
#include "ops/backend/cpu_ops.hpp"
#include "util/error.hpp"

namespace mt::cpu {

void moe_permute(DeviceState*, const MoePermuteArgs& a) {
  const int pairs = a.tokens * a.top_k, E = a.experts;
  std::fill(a.expert_begin, a.expert_begin + E + 1, 0);
  for (int i = 0; i < pairs; ++i) a.expert_begin[a.chosen[i] + 1]++;
  for (int e = 0; e < E; ++e) {
    if (a.load) a.load[e] += a.expert_begin[e + 1];
    a.expert_begin[e + 1] += a.expert_begin[e];
  }
  std::vector<int> fill(a.expert_begin, a.expert_begin + E);
  for (int i = 0; i < pairs; ++i) {
    const int row = fill[a.chosen[i]]++;
    a.perm_token[row] = i / a.top_k;
    a.slot_row[i] = row;
  }
}

void moe_arrivals(DeviceState*, const MoeArrivalsArgs& a) {
  const int L = a.local;
  a.local_begin[0] = 0;
  for (int j = 0; j < L; ++j) {
    int rows = 0;
    for (int q = 0; q < a.sources; ++q) rows += a.counts[q * L + j];
    a.local_begin[j + 1] = a.local_begin[j] + rows;
  }
  MT_CHECK(a.local_begin[L] == a.rows);
  std::vector<int> fill(a.local_begin, a.local_begin + L);
  int arriving = 0;
  for (int q = 0; q < a.sources; ++q)
    for (int j = 0; j < L; ++j)
      for (int i = 0; i < a.counts[q * L + j]; ++i, ++arriving) {
        a.local_of[arriving] = fill[j]++;
        a.arrival_of[a.local_of[arriving]] = arriving;
      }
}

void gather_rows(DeviceState*, const GatherRowsArgs& a) {
  MT_CHECK(!a.src_bf16 || a.dst_bf16);
  for (int r = 0; r < a.rows; ++r) {
    const size_t from = size_t(a.index[r]) * a.cols, to = size_t(r) * a.cols;
    if (a.src_bf16) std::copy(a.src_bf16 + from, a.src_bf16 + from + a.cols, a.dst_bf16 + to);
    else if (a.dst_bf16)
      for (int c = 0; c < a.cols; ++c) a.dst_bf16[to + c].bits = float_to_bf16_bits(a.src[from + c]);
    else std::copy(a.src + from, a.src + from + a.cols, a.dst + to);
  }
}

void moe_combine(DeviceState*, const MoeCombineArgs& a) {
  for (int t = 0; t < a.tokens; ++t)
    for (int k = 0; k < a.top_k; ++k) {
      const float g = a.gates ? a.gates[t * a.top_k + k] : 1.0f;
      const float* row = a.rows + size_t(a.slot_row[t * a.top_k + k]) * a.dim;
      float* out = a.y + size_t(t) * a.dim;
      for (int i = 0; i < a.dim; ++i) out[i] += g * row[i];
    }
}

void moe_combine_backward(DeviceState*, const MoeCombineBackwardArgs& a) {
  for (int t = 0; t < a.tokens; ++t)
    for (int k = 0; k < a.top_k; ++k) {
      const size_t r = size_t(a.slot_row[t * a.top_k + k]);
      const float g = a.gates[t * a.top_k + k];
      const float* dy = a.dy + size_t(t) * a.dim;
      const float* row = a.rows + r * a.dim;
      float* out = a.drows + r * a.dim;
      double dot = 0;
      for (int i = 0; i < a.dim; ++i) {
        out[i] = g * dy[i];
        dot += double(dy[i]) * row[i];
      }
      a.dgate[t * a.top_k + k] = float(dot);
    }
}

void shift_tokens(DeviceState*, const ShiftTokensArgs& a) {
  for (int r = 0; r < a.rows; ++r) {
    const bool inside = r % a.seq + a.shift < a.seq;
    a.tokens_out[r] = inside ? a.tokens[r + a.shift] : 0;
    a.targets_out[r] = inside ? a.targets[r + a.shift] : -1;
  }
}

}  // namespace mt::cpu
