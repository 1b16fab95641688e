#pragma once
// FP8 codes of an activation written by the op that produces it (RMSNorm, SwiGLU), in the same pass
// as its values, for the forward GEMMs that read it: x W^T's A operand, K along the rows. The
// codes and scales are those the GEMM's own quantization makes (1 x tile pieces along K, the
// recipe's format and scale rule), bit for bit, so the GEMM reads them in its place
// (GemmArgs::fp8_a). The math is shared by the CPU reference and the CUDA kernels.
#include <cstdint>

#include "ops/fp8/args.hpp"

namespace mt {

// Codes [rows_pad, ld] (K contiguous, zero in the padding) and one scale per piece of each row,
// [rows][pieces] row-major: Fp8Codes' layout for an activation. codes null: none wanted.
struct Fp8RowCodes {
  uint8_t* codes = nullptr;
  float* scales = nullptr;
  int ld = 0;        // the row width padded to kFp8PadK
  int rows_pad = 0;  // the rows padded to kFp8PadOuter; the rows beyond the producer's get zero codes
  int tile = 128;
  Fp8Format format = Fp8Format::e4m3;
  bool pow2 = true;
};

MT_HD inline int fp8_row_pieces(int cols, int tile) { return (cols + tile - 1) / tile; }

// Piece p of row r, whose values are x[c0, c1): its scale from their largest magnitude, then the codes.
MT_HD inline void fp8_code_piece(const float* x, int r, int p, int cols, const Fp8RowCodes& q) {
  const int c0 = p * q.tile, c1 = c0 + q.tile < cols ? c0 + q.tile : cols;
  float amax = 0.0f;
  for (int c = c0; c < c1; ++c) amax = fmaxf(amax, fabsf(x[c]));
  const float s = fp8_scale(amax, q.format, q.pow2);
  q.scales[size_t(r) * fp8_row_pieces(cols, q.tile) + p] = s;
  uint8_t* codes = q.codes + size_t(r) * q.ld;
  for (int c = c0; c < c1; ++c) codes[c] = float_to_fp8(x[c] / s, q.format);
}

// The codes and scales of row r (values x[0, cols)), with the padding to ld zero.
MT_HD inline void fp8_code_row(const float* x, int r, int cols, const Fp8RowCodes& q) {
  for (int p = 0; p * q.tile < cols; ++p) fp8_code_piece(x, r, p, cols, q);
  for (int c = cols; c < q.ld; ++c) q.codes[size_t(r) * q.ld + c] = 0;
}

// The rows of the padding, [rows, rows_pad): zero codes (cuBLASLt reads them; their products are dropped).
inline void fp8_zero_padding_rows(int rows, const Fp8RowCodes& q) {
  for (size_t i = size_t(rows) * q.ld; i < size_t(q.rows_pad) * q.ld; ++i) q.codes[i] = 0;
}

// Rows [0, rows) of x (cols values each, packed) coded after the fact, then the padding rows: the
// CPU form of a producer that writes its codes with its values.
inline void fp8_code_rows(const float* x, int rows, int cols, const Fp8RowCodes& q) {
  for (int r = 0; r < rows; ++r) fp8_code_row(x + size_t(r) * cols, r, cols, q);
  fp8_zero_padding_rows(rows, q);
}

}  // namespace mt
