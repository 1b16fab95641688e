#pragma once
// Arguments of the FP8 row packing ops. Included by ops/op_list.hpp.
#include "ops/fp8/codes.hpp"
#include "ops/host_device.hpp"

namespace mt {

// Rows in FP8 for the expert-parallel dispatch: each row of `cols` values becomes its codes
// (cols bytes, padded to whole floats) followed by one scale per 1 x `tile` piece, packed into
// fp8_packed_row_floats() floats, so the all-to-all moves about a quarter of the fp32 bytes.
// Unpacking writes the values the codes stand for (codes times scales).
struct Fp8PackRowsArgs {
  int rows = 0, cols = 0, tile = 128;
  Fp8Format format = Fp8Format::e4m3;
  bool pow2_scales = true;
  const float* x = nullptr;  // [rows, cols]
  float* packed = nullptr;   // [rows, fp8_packed_row_floats(cols, tile)]
};
struct Fp8UnpackRowsArgs {
  int rows = 0, cols = 0, tile = 128;
  Fp8Format format = Fp8Format::e4m3;
  const float* packed = nullptr;
  float* x = nullptr;  // [rows, cols] out
};
MT_HD inline int fp8_packed_row_floats(int cols, int tile) { return (cols + 3) / 4 + (cols + tile - 1) / tile; }

}  // namespace mt
