// The grouped GEMM on the GPU. The group offsets are in device memory, and the fast paths never read
// them on the host: bf16 inputs, and the FP8 forward under DeepSeek-V3's block scaling, go to
// CUTLASS's Hopper grouped GEMM (cuda_cutlass.cuh), which takes its problem sizes from device memory.
// Everything else (fp32 inputs, other FP8 recipes and forms, shapes whose rows are not 16-byte
// multiples, a GPU other than sm_90, a build without CUTLASS) runs per group, and is the reference
// that parity checks hold CUTLASS to: the offsets are downloaded (one copy, which waits for the
// stream), then each non-empty group is one GEMM as the CPU reference runs them; fp32 groups go to
// cuBLAS as one cublasGemmGroupedBatchedEx call while cuBLAS accepts it (a refusal is remembered).
#include <cuda_bf16.h>

#include <cstdio>
#include <vector>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/cuda_state.cuh"
#include "ops/gemm/cuda_lt.cuh"
#include "ops/grouped_gemm/cuda_cutlass.cuh"
#include "ops/grouped_gemm/cuda_paths.hpp"
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

// The fp32 groups as one cuBLAS call; false when cuBLAS refuses it (then never asked again).
bool cublas_grouped_fp32(DeviceState* s, const std::vector<GemmArgs>& list) {
  if (s->grouped_fallback_noted) return false;
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
    pointers[i] = g.b, pointers[n + i] = g.a, pointers[2 * n + i] = g.c;
  }
  const void** dev = device_pointers(s, pointers);
  const cublasStatus_t status = cublasGemmGroupedBatchedEx(
      s->blas, op_first.data(), op_second.data(), m_.data(), n_.data(), k_.data(), alpha.data(), dev, CUDA_R_32F,
      ld_first.data(), dev + n, CUDA_R_32F, ld_second.data(), beta.data(), const_cast<void* const*>(dev + 2 * n),
      CUDA_R_32F, ld_out.data(), int(n), one.data(), CUBLAS_COMPUTE_32F);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
    std::fprintf(stderr, "moetrain: note: cuBLAS has no grouped GEMM for fp32 inputs here; the groups run one "
                 "cuBLASLt call each\n");
    s->grouped_fallback_noted = true;
    return false;
  }
  MT_CUBLAS_CHECK(status);
  return true;
}

// The operands of a bf16 call in bfloat16: those stored so as they are, fp32 ones rounded once for
// all groups into scratch. The ragged dimension (m for rows, k for reduce) bounds the rows.
std::pair<const __nv_bfloat16*, const __nv_bfloat16*> bf16_operands(DeviceState* s, const GroupedGemmArgs& a) {
  const bool by_rows = a.ragged == Ragged::rows;
  const size_t rows = size_t(by_rows ? a.m : a.k);
  const size_t a_count = rows * (by_rows ? a.k : a.m);
  const size_t b_count = by_rows ? size_t(a.groups) * a.n * a.k : rows * a.n;
  using Stored = const __nv_bfloat16*;
  Stored x = a.a_bf16 ? reinterpret_cast<Stored>(a.a_bf16) : bf16_copy(s, kScratchGemmA, a.a, a_count);
  Stored w = a.b_bf16 ? reinterpret_cast<Stored>(a.b_bf16) : bf16_copy(s, kScratchGemmB, a.b, b_count);
  return {x, w};
}

// Whether the bf16 kernels take a's layout, judged before anything is rounded: an operand rounded
// into scratch starts 256-byte aligned, one stored in bfloat16 where it is.
bool bf16_fits(const GroupedGemmArgs& a) {
  static const char aligned[16] alignas(16) = {};
  return cutlass_bf16_fits(a, a.a_bf16 ? static_cast<const void*>(a.a_bf16) : aligned,
                           a.b_bf16 ? static_cast<const void*>(a.b_bf16) : aligned);
}

void grouped_gemm_per_group(DeviceState* s, const GroupedGemmArgs& a) {
  if (a.groups <= 0) return;
  activate(s);
  std::vector<int> offsets(size_t(a.groups) + 1);
  MT_CUDA_CHECK(cudaMemcpyAsync(offsets.data(), a.offsets, offsets.size() * sizeof(int), cudaMemcpyDeviceToHost,
                                s->stream));
  MT_CUDA_CHECK(cudaStreamSynchronize(s->stream));
  GroupedGemmArgs host = a;
  host.offsets = offsets.data();
  const std::vector<GemmArgs> list = group_gemms(host);
  if (list.size() > 1 && a.inputs == GemmPrecision::fp32 && cublas_grouped_fp32(s, list)) return;
  for (const GemmArgs& g : list) gemm(s, g);
}

bool grouped_gemm_on_cutlass(DeviceState* s, const GroupedGemmArgs& a) {
  if (a.groups <= 0 || !cutlass_grouped_available(s)) return false;
  if (a.inputs == GemmPrecision::bf16) return bf16_fits(a);
  return a.inputs == GemmPrecision::fp8 && cutlass_grouped_fp8_covers(a);
}

}  // namespace

void grouped_gemm(DeviceState* s, const GroupedGemmArgs& a) {
  MT_CHECK(!a.c_bf16 || (a.inputs == GemmPrecision::bf16 && a.ragged == Ragged::rows && a.beta == 0.0f && !a.c));
  if (a.groups <= 0) return;
  activate(s);
  if (!grouped_gemm_on_cutlass(s, a)) return grouped_gemm_per_group(s, a);
  if (a.inputs == GemmPrecision::fp8) {
    cutlass_grouped_fp8(s, a);
    return;
  }
  const auto [x, w] = bf16_operands(s, a);
  cutlass_grouped_bf16(s, a, x, w);
}

}  // namespace mt::cuda

namespace mt {

void cuda_grouped_gemm_per_group(const Backend& gpu, const GroupedGemmArgs& a) {
  cuda::grouped_gemm_per_group(gpu.state, a);
}

const char* cuda_grouped_gemm_path(const Backend& gpu, const GroupedGemmArgs& a) {
  if (!cuda::grouped_gemm_on_cutlass(gpu.state, a)) return "per-group";
  return a.inputs == GemmPrecision::fp8 ? "cutlass-fp8" : "cutlass-bf16";
}

}  // namespace mt
