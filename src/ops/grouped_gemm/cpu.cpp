// Reference grouped GEMM: one BLAS call per non-empty group.
#include "ops/backend/cpu_ops.hpp"
#include "ops/grouped_gemm/groups.hpp"
#include "util/error.hpp"

namespace mt::cpu {

void grouped_gemm(DeviceState* state, const GroupedGemmArgs& a) {
  MT_CHECK(!a.c_bf16 || a.ragged == Ragged::rows);
  for (const GemmArgs& g : group_gemms(a)) gemm(state, g);
}

}  // namespace mt::cpu
