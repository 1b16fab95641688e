// GemmArgs on the GPU through cuBLASLt, with the CPU reference's semantics (row-major,
// C = alpha*op(A)*op(B) + beta*C). bf16 inputs are rounded to bfloat16 copies first, exactly as
// src/ops/bf16.hpp does on the CPU, then multiplied with fp32 accumulation; fp32 inputs use
// plain fp32 compute (no TF32), so both paths differ from the CPU only in summation order. fp8
// inputs go to cuda_fp8.cu. A bfloat16 C (c_bf16) is cuBLASLt's bf16 D of the same fp32 sums,
// rounded to nearest even in the epilogue. A product cuBLASLt's heuristic finds no algorithm for (odd shapes
// whose output is only 4-byte aligned, say) runs through cublasGemmEx, the same math, and is
// counted in the backend's fallback counts. Leading dimensions and batches go into cuBLASLt's
// matrix layouts; each distinct plan is built once and kept in the device state (LtPlans).
#include <cuda_bf16.h>

#include <cstdint>
#include <cstdio>
#include <memory>

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

// k == 0: the product is empty, so C = beta*C (beta == 0 writes zeros, as BLAS does), for every
// [m, n] matrix of the batch at its strides.
__global__ void scale_kernel(float* __restrict__ c, int m, int n, int ldc, long long batch_c, size_t count,
                             float beta) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const size_t mn = size_t(m) * n, b = i / mn, r = (i % mn) / n, j = i % n;
    float* x = c + b * batch_c + r * ldc + j;
    *x = beta == 0.0f ? 0.0f : beta * *x;
  }
}

// k == 0 with a bfloat16 C (beta 0): every [m, n] matrix of the batch zeroed at its strides.
__global__ void zero_bf16_kernel(__nv_bfloat16* __restrict__ c, int m, int n, int ldc, long long batch_c,
                                 size_t count) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const size_t mn = size_t(m) * n, b = i / mn, r = (i % mn) / n, j = i % n;
    c[b * batch_c + r * ldc + j] = __float2bfloat16_rn(0.0f);
  }
}

// Elements from an operand's first to one past its last: `rows` stored rows of `cols` at row
// stride ld, `batch` times batch_stride apart.
size_t operand_span(int rows, int cols, int ld, int batch, long long batch_stride) {
  return size_t(batch - 1) * size_t(batch_stride) + size_t(rows - 1) * ld + cols;
}

// Enough blocks to fill the GPU a few times over; grid-stride loops cover the rest.
unsigned grid_for(const DeviceState* s, size_t n) {
  const size_t want = (n + kThreads - 1) / kThreads;
  const size_t cap = size_t(s->sm_count > 0 ? s->sm_count : 1) * 16;
  return unsigned(want < cap ? want : cap);
}

// gemm_lt's product through cuBLAS proper, which has a kernel for every shape and alignment:
// the same column-major C^T = op(B)^T op(A)^T with fp32 accumulation and output (bfloat16 for
// c_bf16, rounded from the fp32 sums). beta == 0 does not read C (BLAS semantics), as cuBLASLt does not.
void gemm_ex(DeviceState* s, const GemmArgs& g, const void* a, const void* b, cudaDataType_t in_type) {
  if (!s->force_gemm_fallback && s->fallbacks.calls(FallbackKind::gemm) == 0)
    std::fprintf(stderr, "moetrain: note: no cuBLASLt algorithm for gemm m=%d n=%d k=%d trans_a=%d trans_b=%d "
                 "inputs=%s; it runs through cublasGemmEx (each such call is counted)\n", g.m, g.n, g.k,
                 int(g.trans_a), int(g.trans_b), in_type == CUDA_R_16BF ? "bf16" : "fp32");
  s->fallbacks.add(FallbackKind::gemm, g.m, g.n, g.k);
  const cublasOperation_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  void* c = g.c_bf16 ? static_cast<void*>(g.c_bf16) : static_cast<void*>(g.c);
  const cudaDataType_t out_type = g.c_bf16 ? CUDA_R_16BF : CUDA_R_32F;
  if (g.batch == 1) {
    MT_CUBLAS_CHECK(cublasGemmEx(s->blas, op_first, op_second, g.n, g.m, g.k, &g.alpha, b, in_type, gemm_ldb(g), a,
                                 in_type, gemm_lda(g), &g.beta, c, out_type, gemm_ldc(g), CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
    return;
  }
  MT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(s->blas, op_first, op_second, g.n, g.m, g.k, &g.alpha, b, in_type,
                                             gemm_ldb(g), g.batch_b, a, in_type, gemm_lda(g), g.batch_a, &g.beta, c,
                                             out_type, gemm_ldc(g), g.batch_c, g.batch, CUBLAS_COMPUTE_32F,
                                             CUBLAS_GEMM_DEFAULT));
}

}  // namespace

const __nv_bfloat16* bf16_copy(DeviceState* s, ScratchSlot slot, const float* src, size_t n) {
  auto* dst = static_cast<__nv_bfloat16*>(scratch(s, slot, n * sizeof(__nv_bfloat16)));
  round_to_bf16_kernel<<<grid_for(s, n), kThreads, 0, s->stream>>>(src, dst, n);
  MT_CUDA_CHECK_LAUNCH();
  return dst;
}

void gemm(DeviceState* s, const GemmArgs& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  activate(s);
  // A bfloat16 C: bf16 inputs and beta 0 only (the CPU reference checks the same).
  MT_CHECK(!g.c_bf16 || (g.inputs == GemmPrecision::bf16 && g.beta == 0.0f && !g.c));
  if (g.k == 0 && g.c_bf16) {
    const size_t count = size_t(g.m) * g.n * g.batch;
    zero_bf16_kernel<<<grid_for(s, count), kThreads, 0, s->stream>>>(reinterpret_cast<__nv_bfloat16*>(g.c_bf16), g.m,
                                                                    g.n, gemm_ldc(g), g.batch_c, count);
    MT_CUDA_CHECK_LAUNCH();
    return;
  }
  if (g.k == 0) {
    const size_t count = size_t(g.m) * g.n * g.batch;
    scale_kernel<<<grid_for(s, count), kThreads, 0, s->stream>>>(g.c, g.m, g.n, gemm_ldc(g), g.batch_c, count, g.beta);
    MT_CUDA_CHECK_LAUNCH();
    return;
  }
  if (g.inputs == GemmPrecision::fp8) {
    // The FP8 path quantizes the packed operands of one product (the CPU reference packs strided
    // ones first); no layer passes it strides, so one that does is a bug, stopped here.
    MT_CHECK(gemm_packed(g));
    gemm_fp8(s, g);
    return;
  }
  if (g.inputs == GemmPrecision::bf16) {
    // Operands stored in bfloat16 go in as they are; fp32 ones are rounded into scratch copies
    // that keep their strides (the elements between rows are rounded too, and never read).
    const size_t span_a = operand_span(g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, gemm_lda(g), g.batch, g.batch_a);
    const size_t span_b = operand_span(g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, gemm_ldb(g), g.batch, g.batch_b);
    const void* a = g.a_bf16 ? static_cast<const void*>(g.a_bf16) : bf16_copy(s, kScratchGemmA, g.a, span_a);
    const void* b = g.b_bf16 ? static_cast<const void*>(g.b_bf16) : bf16_copy(s, kScratchGemmB, g.b, span_b);
    gemm_lt(s, g, a, b, CUDA_R_16BF);
  } else {
    MT_CHECK(!g.a_bf16 && !g.b_bf16);
    gemm_lt(s, g, g.a, g.b, CUDA_R_32F);
  }
}

namespace {

// Where g writes C: c, or c_bf16.
void* out_of(const GemmArgs& g) { return g.c_bf16 ? static_cast<void*>(g.c_bf16) : static_cast<void*>(g.c); }

// A layout of `rows` x `cols` (column-major, as cuBLASLt sees our row-major storage) at leading
// dimension ld, with the batch when there is one.
void make_layout(cublasLtMatrixLayout_t* layout, cudaDataType_t type, int rows, int cols, int ld, int batch,
                 long long batch_stride) {
  MT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(layout, type, rows, cols, ld));
  if (batch == 1) return;
  const int32_t count = batch;
  const int64_t stride = batch_stride;
  MT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
  MT_CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
}

// cuBLASLt is column-major, and a row-major X[r,c] is a column-major X^T[c,r]. So compute
// C^T[n,m] = op(B)^T[n,k] * op(A)^T[k,m]: cuBLAS's first operand is our B, its second our A,
// with the same transpose flags, and C^T needs no copy. Layouts describe the stored matrices.
void build_plan(DeviceState* s, const GemmArgs& g, const LtKey& key, cudaDataType_t in_type, LtPlan& plan) {
  LtCall& call = plan.call;
  MT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&call.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int32_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  MT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first));
  MT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second));
  // B stored row-major [k,n] is column-major [n rows, k cols]; stored [n,k] (trans_b) is [k, n].
  if (g.trans_b) make_layout(&call.first, in_type, g.k, g.n, key.ldb, g.batch, g.batch_b);
  else make_layout(&call.first, in_type, g.n, g.k, key.ldb, g.batch, g.batch_b);
  // A stored row-major [m,k] is column-major [k rows, m cols]; stored [k,m] (trans_a) is [m, k].
  if (g.trans_a) make_layout(&call.second, in_type, g.m, g.k, key.lda, g.batch, g.batch_a);
  else make_layout(&call.second, in_type, g.k, g.m, key.lda, g.batch, g.batch_a);
  make_layout(&call.out, cudaDataType_t(key.out_type), g.n, g.m, key.ldc, g.batch, g.batch_c);

  MT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&call.pref));
  const uint64_t ws = s->workspace_bytes;
  MT_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  const auto align = [&](cublasLtMatmulPreferenceAttributes_t attr, uint32_t al) {
    MT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(call.pref, attr, &al, sizeof al));
  };
  align(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);
  align(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
  align(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
  align(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);
  plan.found = find_algorithm(s, call, &plan.heur);
}

// The plan for g with inputs a and b, built on the first call with its key.
const LtPlan& plan_of(DeviceState* s, const GemmArgs& g, const void* a, const void* b, cudaDataType_t in_type) {
  const LtKey key{.type = int(in_type), .m = g.m, .n = g.n, .k = g.k, .lda = gemm_lda(g), .ldb = gemm_ldb(g),
                  .ldc = gemm_ldc(g), .batch = g.batch, .trans_a = g.trans_a, .trans_b = g.trans_b,
                  .batch_a = g.batch_a, .batch_b = g.batch_b, .batch_c = g.batch_c, .align_a = alignment_of(a),
                  .align_b = alignment_of(b), .align_c = alignment_of(out_of(g)), .workspace = s->workspace_bytes,
                  .out_type = int(g.c_bf16 ? CUDA_R_16BF : CUDA_R_32F)};
  std::unique_ptr<LtPlan>& plan = lt_plans(s).plans[key];
  if (!plan) {
    auto made = std::make_unique<LtPlan>();
    build_plan(s, g, key, in_type, *made);
    plan = std::move(made);
  }
  return *plan;
}

}  // namespace

void gemm_lt(DeviceState* s, const GemmArgs& g, const void* a, const void* b, cudaDataType_t in_type) {
  if (s->force_gemm_fallback) return gemm_ex(s, g, a, b, in_type);
  const LtPlan& plan = plan_of(s, g, a, b, in_type);
  if (!plan.found) return gemm_ex(s, g, a, b, in_type);
  // alpha and beta are read from host memory at call time (the default pointer mode).
  void* c = out_of(g);
  MT_CUBLAS_CHECK(cublasLtMatmul(s->lt, plan.call.op, &g.alpha, b, plan.call.first, a, plan.call.second, &g.beta, c,
                                 plan.call.out, c, plan.call.out, &plan.heur.algo, s->workspace, s->workspace_bytes,
                                 s->stream));
}

}  // namespace mt::cuda
