// Reference grouped GEMM: one BLAS call per non-empty group.
#include "ops/cpu/cpu_ops.hpp"

namespace mt::cpu {

void grouped_gemm(DeviceState* state, const GroupedGemmArgs& a) {
  for (int g = 0; g < a.groups; ++g) {
    const int begin = a.offsets[g], rows = a.offsets[g + 1] - begin;
    if (rows == 0) continue;
    if (a.ragged == Ragged::rows)
      gemm(state, {.m = rows, .n = a.n, .k = a.k, .a = a.a + size_t(begin) * a.k,
                   .b = a.b + size_t(g) * a.n * a.k, .trans_b = a.trans_b, .c = a.c + size_t(begin) * a.n,
                   .beta = a.beta, .inputs = a.inputs, .fp8 = a.fp8});
    else
      gemm(state, {.m = a.m, .n = a.n, .k = rows, .a = a.a + size_t(begin) * a.m, .trans_a = true,
                   .b = a.b + size_t(begin) * a.n, .c = a.c + size_t(g) * a.m * a.n, .beta = 1.0f,
                   .inputs = a.inputs, .fp8 = a.fp8});
  }
}

}  // namespace mt::cpu
