// The grouped GEMM on the GPU: the groups' plain GEMMs (ops/grouped_gemm/groups.hpp, as the CPU
// reference runs them) go to cuBLAS as one cublasGemmGroupedBatchedEx call, one problem per group,
// on the backend's stream. The sizes are host arrays; the operand pointers are a device array that
// a one-block kernel writes from its own arguments, so the host never waits on the device. FP8
// inputs (which cuBLAS's grouped GEMM cannot scale) and single groups run as plain GEMMs.
#include <cstdio>
#include <vector>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/cuda_state.cuh"
#include "ops/gemm/cuda_lt.cuh"
#include "ops/grouped_gemm/groups.hpp"
#include "util/error.hpp"

namespace mt::cuda {

namespace {

// Pointers per launch of write_pointers: its arguments stay far below the 4 KiB parameter limit.
constexpr int kPointersPerLaunch = 96;
struct PointerBatch {
  const void* p[kPointersPerLaunch];
  int count;
};

__global__ void write_pointers_kernel(PointerBatch batch, const void** dst) {
  if (int(threadIdx.x) < batch.count) dst[threadIdx.x] = batch.p[threadIdx.x];
}

// A device copy of `host`, written in stream order into the scratch slot for pointer arrays.
const void** device_pointers(DeviceState* s, const std::vector<const void*>& host) {
  auto* dst = static_cast<const void**>(scratch(s, kScratchPointers, host.size() * sizeof(void*)));
  for (size_t at = 0; at < host.size(); at += kPointersPerLaunch) {
    PointerBatch batch{};
    batch.count = int(std::min(host.size() - at, size_t(kPointersPerLaunch)));
    for (int i = 0; i < batch.count; ++i) batch.p[i] = host[at + i];
    write_pointers_kernel<<<1, kPointersPerLaunch, 0, s->stream>>>(batch, dst + at);
    MT_CUDA_CHECK_LAUNCH();
  }
  return dst;
}

void one_by_one(DeviceState* s, const std::vector<GemmArgs>& list) {
  for (const GemmArgs& g : list) gemm(s, g);
}

}  // namespace

void grouped_gemm(DeviceState* s, const GroupedGemmArgs& a) {
  const std::vector<GemmArgs> list = group_gemms(a);
  if (list.empty()) return;
  if (a.inputs == GemmPrecision::fp8 || list.size() == 1) return one_by_one(s, list);
  activate(s);
  // bf16 rounds each fp32 operand once for all groups (one stored in bfloat16 goes as it is); the
  // groups' operands keep their element offsets.
  const int rows = a.offsets[a.groups];
  const bool by_rows = a.ragged == Ragged::rows;
  const size_t a_count = size_t(rows) * (by_rows ? a.k : a.m);
  const size_t b_count = by_rows ? size_t(a.groups) * a.n * a.k : size_t(rows) * a.n;
  const bool bf16 = a.inputs == GemmPrecision::bf16;
  const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const size_t elem = bf16 ? 2 : 4;
  MT_CHECK(bf16 || (!a.a_bf16 && !a.b_bf16));
  const char* a_base = a.a_bf16 ? reinterpret_cast<const char*>(a.a_bf16)
                       : bf16   ? reinterpret_cast<const char*>(bf16_copy(s, kScratchGemmA, a.a, a_count))
                                : reinterpret_cast<const char*>(a.a);
  const char* b_base = a.b_bf16 ? reinterpret_cast<const char*>(a.b_bf16)
                       : bf16   ? reinterpret_cast<const char*>(bf16_copy(s, kScratchGemmB, a.b, b_count))
                                : reinterpret_cast<const char*>(a.b);

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, as in gemm_lt: cuBLAS's first
  // operand is our B, its second our A.
  const size_t n = list.size();
  std::vector<cublasOperation_t> op_first(n), op_second(n);
  std::vector<int> m_(n), n_(n), k_(n), ld_first(n), ld_second(n), ld_out(n), one(n, 1);
  std::vector<float> alpha(n), beta(n);
  std::vector<const void*> pointers(3 * n);
  for (size_t i = 0; i < n; ++i) {
    const GemmArgs& g = list[i];
    op_first[i] = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    op_second[i] = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    m_[i] = g.n, n_[i] = g.m, k_[i] = g.k;
    ld_first[i] = g.trans_b ? g.k : g.n;
    ld_second[i] = g.trans_a ? g.m : g.k;
    ld_out[i] = g.n;
    alpha[i] = g.alpha, beta[i] = g.beta;
    pointers[i] = b_base + (g.b_bf16 ? size_t(g.b_bf16 - a.b_bf16) : size_t(g.b - a.b)) * elem;
    pointers[n + i] = a_base + (g.a_bf16 ? size_t(g.a_bf16 - a.a_bf16) : size_t(g.a - a.a)) * elem;
    pointers[2 * n + i] = g.c;
  }
  const void** dev = device_pointers(s, pointers);
  const cublasStatus_t status = cublasGemmGroupedBatchedEx(
      s->blas, op_first.data(), op_second.data(), m_.data(), n_.data(), k_.data(), alpha.data(), dev, type,
      ld_first.data(), dev + n, type, ld_second.data(), beta.data(), const_cast<void* const*>(dev + 2 * n),
      CUDA_R_32F, ld_out.data(), int(n), one.data(), CUBLAS_COMPUTE_32F);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
    if (!s->grouped_fallback_noted)
      std::fprintf(stderr, "moetrain: note: cuBLAS has no grouped GEMM for %s inputs here; the groups run one "
                   "cuBLASLt call each\n", bf16 ? "bf16" : "fp32");
    s->grouped_fallback_noted = true;
    return one_by_one(s, list);
  }
  MT_CUBLAS_CHECK(status);
}

}  // namespace mt::cuda
