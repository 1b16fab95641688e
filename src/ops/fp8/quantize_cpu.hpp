#pragma once
// FP8 quantization of a row-major matrix on the CPU, piece by piece (ops/fp8/recipe.hpp says which
// pieces), as the CPU reference's FP8 GEMM (ops/gemm/cpu_fp8.cpp) and the tests use it.
#include <cstdint>
#include <vector>

#include "ops/ops.hpp"

namespace mt::cpu {

// The shape of one scaled piece of a stored [rows, cols] matrix.
struct Fp8Pieces {
  int rows = 1, cols = 1;
};
// Pieces of an operand of `kind` whose product dimension K runs along its stored rows
// (k_along_rows) or columns.
Fp8Pieces fp8_pieces(const Fp8Recipe& r, Fp8Operand kind, bool k_along_rows, int rows, int cols);

struct Fp8Matrix {
  int rows = 0, cols = 0;
  Fp8Pieces pieces;
  Fp8Format format = Fp8Format::e4m3;
  std::vector<uint8_t> codes;  // [rows, cols]
  std::vector<float> scales;   // one per piece, row-major over the grid of pieces
  float scale_at(int r, int c) const;
};

Fp8Matrix fp8_quantize(const float* x, int rows, int cols, Fp8Pieces pieces, Fp8Format format, bool pow2_scales);
// Codes times their pieces' scales.
std::vector<float> fp8_dequantize(const Fp8Matrix& q);
// The same values straight from x, without the codes.
std::vector<float> fp8_round_trip(const float* x, int rows, int cols, Fp8Pieces pieces, Fp8Format format,
                                  bool pow2_scales);

}  // namespace mt::cpu
