// GemmArgs on the GPU through cuBLASLt, with the CPU reference's semantics (row-major,
// C = alpha*op(A)*op(B) + beta*C). bf16 inputs are rounded to bfloat16 copies first, exactly as
// src/ops/bf16.hpp does on the CPU, then multiplied with fp32 accumulation; fp32 inputs use
// plain fp32 compute (no TF32), so both paths differ from the CPU only in summation order. fp8
// inputs go to cuda_fp8.cu. A product cuBLASLt's heuristic finds no algorithm for (odd shapes
// whose output is only 4-byte aligned, say) runs through cublasGemmEx, the same math, and is
// counted in the backend's fallback counts.
#include <cuda_bf16.h>

#include <cstdint>
#include <cstdio>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/cuda_state.cuh"
#include "ops/gemm/cuda_lt.cuh"
#include "util/error.hpp"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void round_to_bf16_kernel(const float* __restrict__ in, __nv_bfloat16* __restrict__ out, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = __float2bfloat16_rn(in[i]);
}

// k == 0: the product is empty, so C = beta*C (beta == 0 writes zeros, as BLAS does).
__global__ void scale_kernel(float* __restrict__ c, size_t n, float beta) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    c[i] = beta == 0.0f ? 0.0f : beta * c[i];
}

// Enough blocks to fill the GPU a few times over; grid-stride loops cover the rest.
unsigned grid_for(const DeviceState* s, size_t n) {
  const size_t want = (n + kThreads - 1) / kThreads;
  const size_t cap = size_t(s->sm_count > 0 ? s->sm_count : 1) * 16;
  return unsigned(want < cap ? want : cap);
}

// gemm_lt's product through cuBLAS proper, which has a kernel for every shape and alignment:
// the same column-major C^T = op(B)^T op(A)^T with fp32 accumulation and output. beta == 0
// does not read C (BLAS semantics), as cuBLASLt does not.
void gemm_ex(DeviceState* s, const GemmArgs& g, const void* a, const void* b, cudaDataType_t in_type) {
  if (!s->force_gemm_fallback && s->fallbacks.calls(FallbackKind::gemm) == 0)
    std::fprintf(stderr, "moetrain: note: no cuBLASLt algorithm for gemm m=%d n=%d k=%d trans_a=%d trans_b=%d "
                 "inputs=%s; it runs through cublasGemmEx (each such call is counted)\n", g.m, g.n, g.k,
                 int(g.trans_a), int(g.trans_b), in_type == CUDA_R_16BF ? "bf16" : "fp32");
  s->fallbacks.add(FallbackKind::gemm, g.m, g.n, g.k);
  const cublasOperation_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  MT_CUBLAS_CHECK(cublasGemmEx(s->blas, op_first, op_second, g.n, g.m, g.k, &g.alpha, b, in_type,
                               g.trans_b ? g.k : g.n, a, in_type, g.trans_a ? g.m : g.k, &g.beta, g.c, CUDA_R_32F, g.n,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

const __nv_bfloat16* bf16_copy(DeviceState* s, ScratchSlot slot, const float* src, size_t n) {
  auto* dst = static_cast<__nv_bfloat16*>(scratch(s, slot, n * sizeof(__nv_bfloat16)));
  round_to_bf16_kernel<<<grid_for(s, n), kThreads, 0, s->stream>>>(src, dst, n);
  MT_CUDA_CHECK_LAUNCH();
  return dst;
}

void gemm(DeviceState* s, const GemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
  activate(s);
  const size_t mn = size_t(g.m) * g.n;
  if (g.k == 0) {
    scale_kernel<<<grid_for(s, mn), kThreads, 0, s->stream>>>(g.c, mn, g.beta);
    MT_CUDA_CHECK_LAUNCH();
    return;
  }
  if (g.inputs == GemmPrecision::fp8) {
    gemm_fp8(s, g);
    return;
  }
  if (g.inputs == GemmPrecision::bf16) {
    // Operands stored in bfloat16 go in as they are; fp32 ones are rounded into scratch copies.
    const void* a = g.a_bf16 ? static_cast<const void*>(g.a_bf16) : bf16_copy(s, kScratchGemmA, g.a, size_t(g.m) * g.k);
    const void* b = g.b_bf16 ? static_cast<const void*>(g.b_bf16) : bf16_copy(s, kScratchGemmB, g.b, size_t(g.k) * g.n);
    gemm_lt(s, g, a, b, CUDA_R_16BF);
  } else {
    MT_CHECK(!g.a_bf16 && !g.b_bf16);
    gemm_lt(s, g, g.a, g.b, CUDA_R_32F);
  }
}

void gemm_lt(DeviceState* s, const GemmArgs& g, const void* a, const void* b, cudaDataType_t in_type) {
  // cuBLASLt is column-major, and a row-major X[r,c] is a column-major X^T[c,r]. So compute
  // C^T[n,m] = op(B)^T[n,k] * op(A)^T[k,m]: cuBLAS's first operand is our B, its second our A,
  // with the same transpose flags, and C^T needs no copy. Layouts describe the stored matrices.
  if (s->force_gemm_fallback) return gemm_ex(s, g, a, b, in_type);
  LtCall call;
  MT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&call.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int32_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  MT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first));
  MT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second));
  // B stored row-major [k,n] is column-major [n rows, k cols]; stored [n,k] (trans_b) is [k, n].
  if (g.trans_b)
    MT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.first, in_type, g.k, g.n, g.k));
  else
    MT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.first, in_type, g.n, g.k, g.n));
  // A stored row-major [m,k] is column-major [k rows, m cols]; stored [k,m] (trans_a) is [m, k].
  if (g.trans_a)
    MT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.second, in_type, g.m, g.k, g.m));
  else
    MT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.second, in_type, g.k, g.m, g.k));
  MT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.out, CUDA_R_32F, g.n, g.m, g.n));

  MT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&call.pref));
  const uint64_t ws = s->workspace_bytes;
  MT_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  set_alignment(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, b);
  set_alignment(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, a);
  set_alignment(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, g.c);
  set_alignment(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, g.c);

  cublasLtMatmulHeuristicResult_t heur{};
  if (!find_algorithm(s, call, &heur)) return gemm_ex(s, g, a, b, in_type);
  // alpha and beta are read from host memory at call time (the default pointer mode).
  MT_CUBLAS_CHECK(cublasLtMatmul(s->lt, call.op, &g.alpha, b, call.first, a, call.second, &g.beta, g.c, call.out, g.c,
                                 call.out, &heur.algo, s->workspace, s->workspace_bytes, s->stream));
}

}  // namespace mt::cuda
