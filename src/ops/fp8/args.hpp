#pragma once
// Arguments of the fp8 family's op: a weight's FP8 codes, made once per update for the GEMMs that
// read it (model/prepared_weights.hpp) instead of in every GEMM. Included by ops/op_list.hpp.
#include <cstdint>

#include "ops/fp8/recipe.hpp"

namespace mt {

// The padded shape of FP8 codes as GEMMs read them: K (their leading dimension, in bytes) a
// multiple of 16 as FP8 matmuls need, outer a multiple of 4 as block-scaled ones need.
constexpr int kFp8PadK = 16;
constexpr int kFp8PadOuter = 4;
MT_HD inline int fp8_pad(int n, int multiple) { return (n + multiple - 1) / multiple * multiple; }

// A weight stored [rows, cols] as a GEMM operand [outer, k] with K contiguous: the forward's
// x W^T reads it as stored (outer = rows, K = cols), Dgrad's dy W transposed (outer = cols,
// K = rows). Its pieces are the recipe's weight blocks (or the whole matrix), square, so one set
// of scales serves both, read in the view's order.
struct Fp8WeightLayout {
  int outer = 0, k = 0, outer_pad = 0, k_pad = 0;
  int piece_outer = 1, piece_k = 1;
  int pieces_outer() const { return (outer + piece_outer - 1) / piece_outer; }
  int pieces_k() const { return (k + piece_k - 1) / piece_k; }
  size_t pieces() const { return size_t(pieces_outer()) * pieces_k(); }
  size_t codes() const { return size_t(outer_pad) * k_pad; }
};
inline Fp8WeightLayout fp8_weight_layout(const Fp8Recipe& r, int rows, int cols, bool transposed) {
  Fp8WeightLayout l;
  l.outer = transposed ? cols : rows;
  l.k = transposed ? rows : cols;
  l.outer_pad = fp8_pad(l.outer, kFp8PadOuter);
  l.k_pad = fp8_pad(l.k, kFp8PadK);
  l.piece_outer = r.per_tensor ? (l.outer > 0 ? l.outer : 1) : r.block;
  l.piece_k = r.per_tensor ? (l.k > 0 ? l.k : 1) : r.block;
  return l;
}

// `groups` stored matrices [rows, cols] one after another (the routed experts: one per expert),
// each quantized as the recipe quantizes a weight operand into codes [outer_pad, k_pad] of its
// view (fp8_weight_layout), zero in the padding, and the scale of each piece of the view,
// row-major over the piece grid: the codes and scales the FP8 GEMM would make from x.
struct Fp8WeightArgs {
  const Fp8Recipe* recipe = nullptr;
  const float* x = nullptr;
  int groups = 1, rows = 0, cols = 0;
  bool transposed = false;
  uint8_t* codes = nullptr;  // [groups][layout.codes()]
  float* scales = nullptr;   // [groups][layout.pieces()]
};

}  // namespace mt
