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
    if (a.ragged == Ragged::rows)
      out.push_back({.m = rows, .n = a.n, .k = a.k, .a = a.a + size_t(begin) * a.k, .b = a.b + size_t(g) * a.n * a.k,
                     .trans_b = a.trans_b, .c = a.c + size_t(begin) * a.n, .beta = a.beta, .inputs = a.inputs,
                     .fp8 = a.fp8});
    else
      out.push_back({.m = a.m, .n = a.n, .k = rows, .a = a.a + size_t(begin) * a.m, .trans_a = true,
                     .b = a.b + size_t(begin) * a.n, .c = a.c + size_t(g) * a.m * a.n, .beta = 1.0f,
                     .inputs = a.inputs, .fp8 = a.fp8});
  }
  return out;
}

}  // namespace mt
