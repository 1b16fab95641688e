// The CPU reference of the GEMM with FP8 inputs (the CUDA one: cuda_fp8.cu): both operands
// quantized as their kinds say (ops/fp8/quantize_cpu.hpp), or A read from the codes its producer
// wrote and B from its prepared codes, then multiplied with fp32 accumulation or the recipe's
// limited-precision accumulator.
#include "ops/gemm/cpu_fp8.hpp"

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/fp8/quantize_cpu.hpp"
#include "util/error.hpp"

namespace mt::cpu {

namespace {

// C = alpha A B + beta C from dequantized operands (A [m,k], B [k,n] in their stored layouts),
// summing each output the way the recipe's accumulator model says: a partial sum kept to
// `bits` fraction bits, added into an fp32 total every `promote` products. One row of C at a
// time, so the inner loop runs over contiguous columns.
void gemm_limited_accumulator(const GemmArgs& g, const std::vector<float>& a, const std::vector<float>& b, int bits,
                              int promote) {
  std::vector<float> b_rows(size_t(g.k) * g.n);  // B as [k, n]
  for (int p = 0; p < g.k; ++p)
    for (int j = 0; j < g.n; ++j)
      b_rows[size_t(p) * g.n + j] = g.trans_b ? b[size_t(j) * g.k + p] : b[size_t(p) * g.n + j];
  const uint32_t keep = ~((uint32_t(1) << (23 - bits)) - 1);
  std::vector<float> total(g.n), partial(g.n);
  for (int i = 0; i < g.m; ++i) {
    std::fill(total.begin(), total.end(), 0.0f);
    std::fill(partial.begin(), partial.end(), 0.0f);
    for (int p = 0; p < g.k; ++p) {
      const float x = g.trans_a ? a[size_t(p) * g.m + i] : a[size_t(i) * g.k + p];
      const float* row = b_rows.data() + size_t(p) * g.n;
      for (int j = 0; j < g.n; ++j) {
        uint32_t u;
        const float sum = partial[j] + x * row[j];
        std::memcpy(&u, &sum, 4);
        u &= keep;  // the fraction cut toward zero
        std::memcpy(&partial[j], &u, 4);
      }
      if (promote > 0 && (p + 1) % promote == 0)
        for (int j = 0; j < g.n; ++j) total[j] += partial[j], partial[j] = 0.0f;
    }
    for (int j = 0; j < g.n; ++j) {
      float& c = g.c[size_t(i) * g.n + j];
      c = g.alpha * (total[j] + partial[j]) + (g.beta == 0.0f ? 0.0f : g.beta * c);
    }
  }
}

// B's values from its prepared codes (GemmArgs::fp8_b) in B's stored layout: each code times its
// piece's scale, the values fp8_round_trip gives from b itself.
std::vector<float> prepared_values(const GemmArgs& g) {
  const Fp8Codes& p = g.fp8_b;
  MT_CHECK(g.fp8.b == Fp8Operand::weight && p.transposed == !g.trans_b);
  const Fp8Recipe& r = *g.fp8.recipe;
  const Fp8WeightLayout l = fp8_weight_layout(r, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, p.transposed);
  MT_CHECK(p.ld == l.k_pad);
  const Fp8Format format = r.format(Fp8Operand::weight);
  std::vector<float> out(size_t(g.n) * g.k);
  for (int i = 0; i < g.n; ++i)  // over the view [n, k]
    for (int q = 0; q < g.k; ++q) {
      const float s = p.scales[size_t(i / l.piece_outer) * l.pieces_k() + q / l.piece_k];
      const float v = fp8_to_float(p.codes[size_t(i) * p.ld + q], format) * s;
      out[g.trans_b ? size_t(i) * g.k + q : size_t(q) * g.n + i] = v;
    }
  return out;
}

// A's values (an activation or a gradient) from the codes its producer wrote (GemmArgs::fp8_a):
// each code times its 1 x tile piece's scale, the values fp8_round_trip gives from a itself.
std::vector<float> produced_values(const GemmArgs& g) {
  const Fp8Codes& p = g.fp8_a;
  const Fp8Recipe& r = *g.fp8.recipe;
  MT_CHECK(!g.trans_a && g.fp8.a != Fp8Operand::weight && !r.per_tensor && p.ld == fp8_pad(g.k, kFp8PadK));
  const Fp8Format format = r.format(g.fp8.a);
  const int pieces = (g.k + r.tile - 1) / r.tile;
  std::vector<float> out(size_t(g.m) * g.k);
  for (int i = 0; i < g.m; ++i)
    for (int q = 0; q < g.k; ++q)
      out[size_t(i) * g.k + q] =
          fp8_to_float(p.codes[size_t(i) * p.ld + q], format) * p.scales[size_t(i) * pieces + q / r.tile];
  return out;
}

}  // namespace

void gemm_fp8(const GemmArgs& g) {
  const Fp8Recipe& r = *g.fp8.recipe;
  // Stored shapes: A is [m,k] ([k,m] when trans_a), B is [k,n] ([n,k] when trans_b).
  const int a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
  const int b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
  const std::vector<float> a =
      g.fp8_a.codes ? produced_values(g)
                    : fp8_round_trip(g.a, a_rows, a_cols, fp8_pieces(r, g.fp8.a, g.trans_a, a_rows, a_cols),
                                     r.format(g.fp8.a), r.pow2_scales);
  const std::vector<float> b =
      g.fp8_b.codes ? prepared_values(g)
                    : fp8_round_trip(g.b, b_rows, b_cols, fp8_pieces(r, g.fp8.b, !g.trans_b, b_rows, b_cols),
                                     r.format(g.fp8.b), r.pow2_scales);
  if (r.accumulator_bits > 0) {
    gemm_limited_accumulator(g, a, b, r.accumulator_bits, r.promote_every);
    return;
  }
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n,
              g.k, g.alpha, a.data(), a_cols, b.data(), b_cols, g.beta, g.c, g.n);
}

}  // namespace mt::cpu
