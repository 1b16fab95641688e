#pragma once
// What the cuBLASLt GEMM paths share: cuda.cu (fp32 and bf16 inputs) and cuda_fp8.cu.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_state.cuh"

namespace mt::cuda {

// Largest power of two (up to cuBLASLt's default assumption of 256) dividing the address. The
// heuristic otherwise assumes 256-byte alignment and may pick kernels that fault on sub-views.
inline uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && (a % al) != 0) al >>= 1;
  return al;
}

// The cuBLASLt descriptors of one call, destroyed on every path out.
struct LtCall {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  LtCall() = default;
  LtCall(const LtCall&) = delete;
  LtCall& operator=(const LtCall&) = delete;
  ~LtCall() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (out) cublasLtMatrixLayoutDestroy(out);
    if (second) cublasLtMatrixLayoutDestroy(second);
    if (first) cublasLtMatrixLayoutDestroy(first);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

inline void set_alignment(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* p) {
  const uint32_t al = alignment_of(p);
  MT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &al, sizeof al));
}

// cuBLASLt's best algorithm for `call` into *heur, or false when it has none: an unsupported
// combination (shape, alignment, types, scale modes) finds no result, or CUBLAS_STATUS_NOT_SUPPORTED.
inline bool find_algorithm(DeviceState* s, const LtCall& call, cublasLtMatmulHeuristicResult_t* heur) {
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(s->lt, call.op, call.first, call.second, call.out,
                                                               call.out, call.pref, 1, heur, &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  MT_CUBLAS_CHECK(status);
  return found > 0 && heur->state == CUBLAS_STATUS_SUCCESS;
}

// n values of src rounded to bfloat16 in the scratch buffer `slot` (valid until its next use).
const __nv_bfloat16* bf16_copy(DeviceState* s, ScratchSlot slot, const float* src, size_t n);

// g (k > 0) computed from inputs a and b of element type `type` (CUDA_R_32F or CUDA_R_16BF),
// stored as g says its A and B are.
void gemm_lt(DeviceState* s, const GemmArgs& g, const void* a, const void* b, cudaDataType_t type);

// g with inputs == fp8 and k > 0 (cuda_fp8.cu).
void gemm_fp8(DeviceState* s, const GemmArgs& g);

}  // namespace mt::cuda
