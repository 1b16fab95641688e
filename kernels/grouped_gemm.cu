// The grouped GEMM on the GPU: the group offsets come back to the host (one small copy), then
// each non-empty group is one cuBLASLt call on the backend's stream, with the CPU reference's
// pointer arithmetic. cuBLASLt has no grouped GEMM and cuBLAS's grouped GEMM would need the same
// host-side sizes, so the calls are issued back to back; fusing them is speed work.
#include <vector>

#include "cuda_check.cuh"
#include "cuda_ops.hpp"
#include "cuda_state.cuh"

namespace mt::cuda {

void grouped_gemm(DeviceState* s, const GroupedGemmArgs& a) {
  if (a.groups == 0) return;
  activate(s);
  std::vector<int> offsets(size_t(a.groups) + 1);
  MT_CUDA_CHECK(cudaMemcpyAsync(offsets.data(), a.offsets, offsets.size() * sizeof(int), cudaMemcpyDeviceToHost,
                                s->stream));
  MT_CUDA_CHECK(cudaStreamSynchronize(s->stream));
  for (int g = 0; g < a.groups; ++g) {
    const int begin = offsets[g], rows = offsets[g + 1] - begin;
    if (rows == 0) continue;
    if (a.ragged == Ragged::rows)
      gemm(s, {.m = rows, .n = a.n, .k = a.k, .a = a.a + size_t(begin) * a.k, .b = a.b + size_t(g) * a.n * a.k,
               .trans_b = a.trans_b, .c = a.c + size_t(begin) * a.n, .beta = a.beta, .inputs = a.inputs, .fp8 = a.fp8});
    else
      gemm(s, {.m = a.m, .n = a.n, .k = rows, .a = a.a + size_t(begin) * a.m, .trans_a = true,
               .b = a.b + size_t(begin) * a.n, .c = a.c + size_t(g) * a.m * a.n, .beta = 1.0f, .inputs = a.inputs,
               .fp8 = a.fp8});
  }
}

}  // namespace mt::cuda
