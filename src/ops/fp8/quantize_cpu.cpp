#include "ops/fp8/quantize_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/backend/cpu_ops.hpp"

namespace mt::cpu {

namespace {

int pieces_along(int n, int piece) { return (n + piece - 1) / piece; }

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

// The stored matrix quantized as the GEMM does it, its codes and scales then laid out in the view.
void fp8_quantize_weight(DeviceState*, const Fp8WeightArgs& a) {
  const Fp8Recipe& r = *a.recipe;
  const Fp8WeightLayout l = fp8_weight_layout(r, a.rows, a.cols, a.transposed);
  const Fp8Pieces pieces = fp8_pieces(r, Fp8Operand::weight, !a.transposed, a.rows, a.cols);
  const int grid_cols = pieces_along(a.cols, pieces.cols);
  for (int g = 0; g < a.groups; ++g) {
    const Fp8Matrix q = fp8_quantize(a.x + size_t(g) * a.rows * a.cols, a.rows, a.cols, pieces,
                                     r.format(Fp8Operand::weight), r.pow2_scales);
    uint8_t* codes = a.codes + g * l.codes();
    for (int i = 0; i < l.outer_pad; ++i)
      for (int p = 0; p < l.k_pad; ++p) {
        const bool real = i < l.outer && p < l.k;
        const size_t at = a.transposed ? size_t(p) * a.cols + i : size_t(i) * a.cols + p;
        codes[size_t(i) * l.k_pad + p] = real ? q.codes[at] : 0;
      }
    float* scales = a.scales + g * l.pieces();
    for (int i = 0; i < l.pieces_outer(); ++i)
      for (int p = 0; p < l.pieces_k(); ++p)
        scales[size_t(i) * l.pieces_k() + p] =
            q.scales[a.transposed ? size_t(p) * grid_cols + i : size_t(i) * grid_cols + p];
  }
}

}  // namespace mt::cpu
