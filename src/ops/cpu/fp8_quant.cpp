#include "ops/cpu/fp8_quant.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace mt::cpu {

namespace {

int pieces_along(int n, int piece) { return (n + piece - 1) / piece; }

// C = alpha A B + beta C from dequantized operands (A [m,k], B [k,n] in their stored layouts),
// summing each output the way the recipe's accumulator model says: a partial sum kept to
// `bits` fraction bits, added into an fp32 total every `promote` products. One row of C at a
// time, so the inner loop runs over contiguous columns.
void gemm_limited_accumulator(const GemmArgs& g, const std::vector<float>& a, const std::vector<float>& b, int bits,
                              int promote) {
  std::vector<float> b_rows(size_t(g.k) * g.n);  // B as [k, n]
  for (int p = 0; p < g.k; ++p)
    for (int j = 0; j < g.n; ++j) b_rows[size_t(p) * g.n + j] = g.trans_b ? b[size_t(j) * g.k + p] : b[size_t(p) * g.n + j];
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

}  // namespace

Fp8Pieces fp8_pieces(const Fp8Recipe& r, Fp8Operand kind, bool k_along_rows, int rows, int cols) {
  if (r.per_tensor) return {std::max(rows, 1), std::max(cols, 1)};
  if (kind == Fp8Operand::weight) return {r.block, r.block};
  return k_along_rows ? Fp8Pieces{r.tile, 1} : Fp8Pieces{1, r.tile};
}

float Fp8Matrix::scale_at(int r, int c) const {
  return scales[size_t(r / pieces.rows) * pieces_along(cols, pieces.cols) + size_t(c / pieces.cols)];
}

namespace {
// Calls each(r, c, scale) for every element of a [rows, cols] matrix, piece by piece, with the
// scale of the element's piece (from the piece's largest magnitude); `piece(index, scale)` first.
template <class Piece, class Each>
void for_each_piece(const float* x, int rows, int cols, Fp8Pieces pieces, Fp8Format format, bool pow2_scales,
                    Piece piece, Each each) {
  const int grid_rows = pieces_along(rows, pieces.rows), grid_cols = pieces_along(cols, pieces.cols);
  for (int pr = 0; pr < grid_rows; ++pr)
    for (int pc = 0; pc < grid_cols; ++pc) {
      const int r0 = pr * pieces.rows, r1 = std::min(rows, r0 + pieces.rows);
      const int c0 = pc * pieces.cols, c1 = std::min(cols, c0 + pieces.cols);
      float amax = 0.0f;
      for (int r = r0; r < r1; ++r)
        for (int c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(x[size_t(r) * cols + c]));
      const float s = fp8_scale(amax, format, pow2_scales);
      piece(size_t(pr) * grid_cols + pc, s);
      for (int r = r0; r < r1; ++r)
        for (int c = c0; c < c1; ++c) each(size_t(r) * cols + c, s);
    }
}
}  // namespace

Fp8Matrix fp8_quantize(const float* x, int rows, int cols, Fp8Pieces pieces, Fp8Format format, bool pow2_scales) {
  Fp8Matrix q{rows, cols, pieces, format, std::vector<uint8_t>(size_t(rows) * cols), {}};
  q.scales.resize(size_t(pieces_along(rows, pieces.rows)) * pieces_along(cols, pieces.cols));
  for_each_piece(
      x, rows, cols, pieces, format, pow2_scales, [&](size_t p, float s) { q.scales[p] = s; },
      [&](size_t i, float s) { q.codes[i] = float_to_fp8(x[i] / s, format); });
  return q;
}

// x quantized and read back, piece by piece: what fp8_dequantize(fp8_quantize(...)) gives, without
// the codes (the GEMM's inner loop).
std::vector<float> fp8_round_trip(const float* x, int rows, int cols, Fp8Pieces pieces, Fp8Format format,
                                  bool pow2_scales) {
  std::vector<float> out(size_t(rows) * cols);
  for_each_piece(
      x, rows, cols, pieces, format, pow2_scales, [](size_t, float) {},
      [&](size_t i, float s) { out[i] = round_to_fp8(x[i] / s, format) * s; });
  return out;
}

std::vector<float> fp8_dequantize(const Fp8Matrix& q) {
  std::vector<float> out(q.codes.size());
  for (int r = 0; r < q.rows; ++r)
    for (int c = 0; c < q.cols; ++c)
      out[size_t(r) * q.cols + c] = fp8_to_float(q.codes[size_t(r) * q.cols + c], q.format) * q.scale_at(r, c);
  return out;
}

void gemm_fp8(const GemmArgs& g) {
  const Fp8Recipe& r = *g.fp8.recipe;
  // Stored shapes: A is [m,k] ([k,m] when trans_a), B is [k,n] ([n,k] when trans_b).
  const int a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
  const int b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
  const std::vector<float> a = fp8_round_trip(g.a, a_rows, a_cols, fp8_pieces(r, g.fp8.a, g.trans_a, a_rows, a_cols),
                                              r.format(g.fp8.a), r.pow2_scales);
  const std::vector<float> b = fp8_round_trip(g.b, b_rows, b_cols, fp8_pieces(r, g.fp8.b, !g.trans_b, b_rows, b_cols),
                                              r.format(g.fp8.b), r.pow2_scales);
  if (r.accumulator_bits > 0) {
    gemm_limited_accumulator(g, a, b, r.accumulator_bits, r.promote_every);
    return;
  }
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n,
              g.k, g.alpha, a.data(), a_cols, b.data(), b_cols, g.beta, g.c, g.n);
}

}  // namespace mt::cpu
