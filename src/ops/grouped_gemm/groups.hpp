#pragma once
// A grouped GEMM as the plain GEMMs it stands for, one per non-empty group. The CPU reference
// runs them one by one; the CUDA backend hands the same list to cuBLAS as one grouped call, so
// both read the operands through this one piece of pointer arithmetic.
#include <vector>

#include "ops/ops.hpp"

namespace mt {

inline std::vector<GemmArgs> group_gemms(const GroupedGemmArgs& a) {
  std::vector<GemmArgs> out;
  for (int g = 0; g < a.groups; ++g) {
    const int begin = a.offsets[g], rows = a.offsets[g + 1] - begin;
    if (rows == 0) continue;
    // Element offsets of the group's A and B, applied to whichever pointer holds each.
    const size_t a_at = size_t(begin) * (a.ragged == Ragged::rows ? a.k : a.m);
    const size_t b_at = a.ragged == Ragged::rows ? size_t(g) * a.n * a.k : size_t(begin) * a.n;
    GemmArgs one{.a = a.a ? a.a + a_at : nullptr, .b = a.b ? a.b + b_at : nullptr, .inputs = a.inputs, .fp8 = a.fp8,
                 .a_bf16 = a.a_bf16 ? a.a_bf16 + a_at : nullptr, .b_bf16 = a.b_bf16 ? a.b_bf16 + b_at : nullptr};
    if (a.ragged == Ragged::rows) {
      one.fp8_b = a.fp8_b;
      if (a.fp8_b.codes) {
        one.fp8_b.codes += size_t(g) * a.fp8_b.group_codes;
        one.fp8_b.scales += size_t(g) * a.fp8_b.group_scales;
      }
      one.m = rows, one.n = a.n, one.k = a.k, one.trans_b = a.trans_b;
      one.c = a.c ? a.c + size_t(begin) * a.n : nullptr, one.beta = a.beta;
      one.c_bf16 = a.c_bf16 ? a.c_bf16 + size_t(begin) * a.n : nullptr;
      if (a.fp8_a.codes) {
        const int tile = a.fp8.recipe->tile;
        one.fp8_a = a.fp8_a;
        one.fp8_a.codes += size_t(begin) * a.fp8_a.ld;
        one.fp8_a.scales += size_t(begin) * ((a.k + tile - 1) / tile);
      }
    } else {
      one.m = a.m, one.n = a.n, one.k = rows, one.trans_a = true;
      one.c = a.c + size_t(g) * a.m * a.n, one.beta = 1.0f;
    }
    out.push_back(one);
  }
  return out;
}

}  // namespace mt
