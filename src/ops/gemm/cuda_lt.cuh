#pragma once
// What the cuBLASLt GEMM paths share: cuda.cu (fp32 and bf16 inputs) and cuda_fp8.cu.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <tuple>
#include <type_traits>
#include <unordered_map>

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

// A hash of a key's fields() (a tuple of numbers, enums, flags and pointers).
struct FieldsHash {
  template <class T>
  static unsigned long long bits(T v) {
    if constexpr (std::is_pointer_v<T>) return reinterpret_cast<uintptr_t>(v);
    else return static_cast<unsigned long long>(v);
  }
  template <class Key>
  size_t operator()(const Key& key) const {
    return std::apply([](auto... v) {
      size_t h = 0;
      ((h ^= bits(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)), ...);
      return h;
    }, key.fields());
  }
};

// Everything that decides an fp32/bf16 GEMM's cuBLASLt plan (descriptors, heuristic, algorithm):
// the input and output types (compute and scale types are always fp32), the shape, the transposes,
// the leading dimensions, the batch count and strides, the alignment of each operand's address
// (the heuristic's minimum-alignment preferences) and the workspace it may use. alpha and beta
// are read from host memory at each call and the pointers themselves are arguments of the
// call, so two calls with equal keys take the same plan: the key is complete.
struct LtKey {
  int type = 0, m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0, batch = 1;
  bool trans_a = false, trans_b = false;
  long long batch_a = 0, batch_b = 0, batch_c = 0;
  uint32_t align_a = 0, align_b = 0, align_c = 0;
  size_t workspace = 0;
  int out_type = CUDA_R_32F;  // C's type: fp32, or bfloat16 (GemmArgs::c_bf16)
  bool operator==(const LtKey&) const = default;
  auto fields() const {
    return std::tuple(type, m, n, k, lda, ldb, ldc, batch, trans_a, trans_b, batch_a, batch_b, batch_c, align_a,
                      align_b, align_c, workspace, out_type);
  }
};

// The same for an FP8 product (cuda_fp8.cu), whose transposes are fixed (TN over K-contiguous
// codes) and whose output is fp32: the operands' FP8 types and cuBLASLt scale modes, K and the
// padded outer sizes (the layouts), the addresses of the scales (the descriptor holds them; they
// live in scratch, so they change only when it grows), the alignment of the codes and of the
// output, and the workspace.
struct Fp8LtKey {
  int type_a = 0, type_b = 0, mode_a = 0, mode_b = 0, k_pad = 0, outer_a = 0, outer_b = 0;
  const void* scales_a = nullptr;
  const void* scales_b = nullptr;
  uint32_t align_a = 0, align_b = 0, align_d = 0;
  size_t workspace = 0;
  bool operator==(const Fp8LtKey&) const = default;
  auto fields() const {
    return std::tuple(type_a, type_b, mode_a, mode_b, k_pad, outer_a, outer_b, scales_a, scales_b, align_a, align_b,
                      align_d, workspace);
  }
};

// A plan: the call's descriptors and cuBLASLt's algorithm for them (found false: it has none).
struct LtPlan {
  LtCall call;
  cublasLtMatmulHeuristicResult_t heur{};
  bool found = false;
};

// The plans of one device's GEMMs so far (DeviceState::lt_plans). A training step repeats the
// same few shapes, so after the first step no GEMM builds a descriptor or runs the heuristic.
struct LtPlans {
  std::unordered_map<LtKey, std::unique_ptr<LtPlan>, FieldsHash> plans;
  std::unordered_map<Fp8LtKey, std::unique_ptr<LtPlan>, FieldsHash> fp8_plans;
};

// The device's plans, made on first use.
inline LtPlans& lt_plans(DeviceState* s) {
  if (!s->lt_plans) s->lt_plans = std::make_shared<LtPlans>();
  return *s->lt_plans;
}

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
