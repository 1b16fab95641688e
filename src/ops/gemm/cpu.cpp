// Reference GEMM: OpenBLAS sgemm. The bf16 variant rounds copies of A and B to bfloat16 first (or
// widens operands stored in bfloat16), so it computes exactly the products the GPU's BF16-input,
// FP32-accumulate GEMM computes. FP8 inputs go to cpu_fp8.cpp, which quantizes them by the call's recipe.
#include <cblas.h>

#include <vector>

#include "ops/bf16.hpp"
#include "ops/backend/cpu_ops.hpp"
#include "ops/gemm/cpu_fp8.hpp"
#include "util/error.hpp"

namespace mt::cpu {

void gemm(DeviceState*, const GemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
  if (g.inputs == GemmPrecision::fp8 && g.k > 0) {
    gemm_fp8(g);
    return;
  }
  MT_CHECK((!g.a_bf16 && !g.b_bf16) || g.inputs == GemmPrecision::bf16);
  const float* a = g.a;
  const float* b = g.b;
  std::vector<float> a16, b16;
  if (g.inputs == GemmPrecision::bf16) {
    a16.resize(size_t(g.m) * g.k);
    b16.resize(size_t(g.k) * g.n);
    for (size_t i = 0; i < a16.size(); ++i)
      a16[i] = g.a_bf16 ? bf16_bits_to_float(g.a_bf16[i].bits) : round_to_bf16(g.a[i]);
    for (size_t i = 0; i < b16.size(); ++i)
      b16[i] = g.b_bf16 ? bf16_bits_to_float(g.b_bf16[i].bits) : round_to_bf16(g.b[i]);
    a = a16.data();
    b = b16.data();
  }
  const int lda = g.trans_a ? g.m : g.k;
  const int ldb = g.trans_b ? g.k : g.n;
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
              g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, g.c, g.n);
}

}  // namespace mt::cpu
