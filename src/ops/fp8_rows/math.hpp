#pragma once
// One row's FP8 packing for the expert-parallel dispatch (ops Fp8PackRows / Fp8UnpackRows), shared
// by the CPU reference and the CUDA kernel: codes as bytes from the row's first float on, the
// pieces' scales after them.
#include <cstdint>

#include "ops/fp8/recipe.hpp"

namespace mt {

MT_HD inline void fp8_pack_row(const float* x, int cols, int tile, Fp8Format format, bool pow2, float* packed) {
  uint8_t* codes = reinterpret_cast<uint8_t*>(packed);
  float* scales = packed + (cols + 3) / 4;
  for (int c = cols; c < (cols + 3) / 4 * 4; ++c) codes[c] = 0;
  for (int p = 0; p * tile < cols; ++p) {
    const int end = (p + 1) * tile < cols ? (p + 1) * tile : cols;
    float amax = 0.0f;
    for (int c = p * tile; c < end; ++c) amax = fmaxf(amax, fabsf(x[c]));
    const float s = fp8_scale(amax, format, pow2);
    scales[p] = s;
    for (int c = p * tile; c < end; ++c) codes[c] = float_to_fp8(x[c] / s, format);
  }
}

MT_HD inline void fp8_unpack_row(const float* packed, int cols, int tile, Fp8Format format, float* x) {
  const uint8_t* codes = reinterpret_cast<const uint8_t*>(packed);
  const float* scales = packed + (cols + 3) / 4;
  for (int c = 0; c < cols; ++c) x[c] = fp8_to_float(codes[c], format) * scales[c / tile];
}

}  // namespace mt
