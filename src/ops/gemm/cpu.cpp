// Reference GEMM: OpenBLAS sgemm. The bf16 variant rounds copies of A and B to bfloat16 first (or
// widens operands stored in bfloat16), so it computes exactly the products the GPU's BF16-input,
// FP32-accumulate GEMM computes; a bfloat16 C is that fp32 result rounded at the store, as the
// GPU's epilogue rounds it. FP8 inputs go to cpu_fp8.cpp, which quantizes them by the call's recipe.
// Strided and batched calls are a loop of single products; fp32 ones hand their leading
// dimensions to BLAS, the others pack their operands first (the same values, so the same sums).
#include <cblas.h>

#include <vector>

#include "ops/bf16.hpp"
#include "ops/backend/cpu_ops.hpp"
#include "ops/gemm/cpu_fp8.hpp"
#include "util/error.hpp"

namespace mt::cpu {

namespace {

// A stored [rows, cols] matrix at row stride ld, packed (and widened or rounded as `value` says).
template <class T, class F>
std::vector<float> packed(const T* x, int rows, int cols, int ld, F value) {
  std::vector<float> out(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[size_t(r) * cols + c] = value(x[size_t(r) * ld + c]);
  return out;
}

float same(float x) { return x; }
float widen(Bf16 x) { return bf16_bits_to_float(x.bits); }

void one_product(const GemmArgs& g);

// g with C in bfloat16: the fp32 product into a packed scratch C, then each sum rounded once.
void product_to_bf16(const GemmArgs& g) {
  MT_CHECK(g.inputs == GemmPrecision::bf16 && g.beta == 0.0f && !g.c);
  std::vector<float> c(size_t(g.m) * g.n);
  GemmArgs p = g;
  p.c = c.data(), p.ldc = 0, p.c_bf16 = nullptr;
  if (g.k > 0) one_product(p);  // an empty sum is the zeros c starts as
  const int ldc = gemm_ldc(g);
  for (int r = 0; r < g.m; ++r)
    for (int j = 0; j < g.n; ++j) g.c_bf16[size_t(r) * ldc + j].bits = float_to_bf16_bits(c[size_t(r) * g.n + j]);
}

// One product of g (batch 1) whose operands are read at their strides.
void one_product(const GemmArgs& g) {
  if (g.c_bf16) return product_to_bf16(g);
  const int a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
  const int b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
  const int lda = gemm_lda(g), ldb = gemm_ldb(g), ldc = gemm_ldc(g);
  if (g.inputs == GemmPrecision::fp8 && gemm_packed(g)) return gemm_fp8(g);
  if (g.inputs == GemmPrecision::fp8) {
    // The FP8 reference quantizes packed operands: pack them, and C, then unpack C.
    GemmArgs p = g;
    std::vector<float> a = packed(g.a, a_rows, a_cols, lda, same), b = packed(g.b, b_rows, b_cols, ldb, same);
    std::vector<float> c = packed(g.c, g.m, g.n, ldc, same);
    p.a = a.data(), p.b = b.data(), p.c = c.data(), p.lda = p.ldb = p.ldc = 0;
    gemm_fp8(p);
    for (int r = 0; r < g.m; ++r)
      for (int j = 0; j < g.n; ++j) g.c[size_t(r) * ldc + j] = c[size_t(r) * g.n + j];
    return;
  }
  MT_CHECK((!g.a_bf16 && !g.b_bf16) || g.inputs == GemmPrecision::bf16);
  const auto order = CblasRowMajor;
  const auto ta = g.trans_a ? CblasTrans : CblasNoTrans, tb = g.trans_b ? CblasTrans : CblasNoTrans;
  if (g.inputs != GemmPrecision::bf16) {
    cblas_sgemm(order, ta, tb, g.m, g.n, g.k, g.alpha, g.a, lda, g.b, ldb, g.beta, g.c, ldc);
    return;
  }
  const std::vector<float> a = g.a_bf16 ? packed(g.a_bf16, a_rows, a_cols, lda, widen)
                                        : packed(g.a, a_rows, a_cols, lda, round_to_bf16);
  const std::vector<float> b = g.b_bf16 ? packed(g.b_bf16, b_rows, b_cols, ldb, widen)
                                        : packed(g.b, b_rows, b_cols, ldb, round_to_bf16);
  cblas_sgemm(order, ta, tb, g.m, g.n, g.k, g.alpha, a.data(), a_cols, b.data(), b_cols, g.beta, g.c, ldc);
}

}  // namespace

void gemm(DeviceState*, const GemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
  MT_CHECK(g.batch >= 1);
  for (int i = 0; i < g.batch; ++i) {
    GemmArgs one = g;
    one.batch = 1;
    one.a = g.a ? g.a + i * g.batch_a : nullptr;
    one.b = g.b ? g.b + i * g.batch_b : nullptr;
    one.a_bf16 = g.a_bf16 ? g.a_bf16 + i * g.batch_a : nullptr;
    one.b_bf16 = g.b_bf16 ? g.b_bf16 + i * g.batch_b : nullptr;
    one.c = g.c ? g.c + i * g.batch_c : nullptr;
    one.c_bf16 = g.c_bf16 ? g.c_bf16 + i * g.batch_c : nullptr;
    if (g.k == 0 && g.inputs == GemmPrecision::fp8) one.inputs = GemmPrecision::fp32;  // an empty sum: BLAS's beta C
    one_product(one);
  }
}

}  // namespace mt::cpu
