#pragma once
// The warp-wide form of fp8_code_piece (row_codes.hpp) for the CUDA producers that write FP8 codes
// with their output: the same amax (a max, exact in any order), fp8_scale and float_to_fp8; and a
// pass that codes rows already written, for ops whose kernels cannot.
#include <cstdint>

#include "ops/backend/cuda_state.cuh"
#include "ops/fp8/row_codes.hpp"

namespace mt::cuda {

// One whole warp, every lane calling: out_row[c] = value(c) for the columns of piece p of row r,
// then the piece's scale and codes from the values written.
template <class Value>
__device__ void fp8_code_piece_warp(Value value, float* out_row, int r, int p, int cols, const Fp8RowCodes& q) {
  const int lane = threadIdx.x & 31, c0 = p * q.tile, c1 = min(cols, c0 + q.tile);
  float m = 0.0f;
  for (int c = c0 + lane; c < c1; c += 32) {
    const float v = value(c);
    out_row[c] = v;
    m = fmaxf(m, fabsf(v));
  }
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  const float s = fp8_scale(m, q.format, q.pow2);
  if (lane == 0) q.scales[size_t(r) * fp8_row_pieces(cols, q.tile) + p] = s;
  uint8_t* codes = q.codes + size_t(r) * q.ld;
  for (int c = c0 + lane; c < c1; c += 32) codes[c] = float_to_fp8(out_row[c] / s, q.format);
}

// The same for a row already stored (row: its values), read, not written.
__device__ inline void fp8_code_stored_piece_warp(const float* row, int r, int p, int cols, const Fp8RowCodes& q) {
  const int lane = threadIdx.x & 31, c0 = p * q.tile, c1 = min(cols, c0 + q.tile);
  float m = 0.0f;
  for (int c = c0 + lane; c < c1; c += 32) m = fmaxf(m, fabsf(row[c]));
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  const float s = fp8_scale(m, q.format, q.pow2);
  if (lane == 0) q.scales[size_t(r) * fp8_row_pieces(cols, q.tile) + p] = s;
  uint8_t* codes = q.codes + size_t(r) * q.ld;
  for (int c = c0 + lane; c < c1; c += 32) codes[c] = float_to_fp8(row[c] / s, q.format);
}

// Zero codes in columns [from, to) of row r (the padding), by `threads` threads numbered t.
__device__ inline void fp8_zero_codes(const Fp8RowCodes& q, int r, int from, int to, int t, int threads) {
  for (int c = from + t; c < to; c += threads) q.codes[size_t(r) * q.ld + c] = 0;
}

// The codes of x's rows [0, rows) (cols values each, packed) and zero codes in the padding, one
// pass over x on s's stream: for an op whose kernels write their output without its codes.
void fp8_code_rows(DeviceState* s, const float* x, int rows, int cols, const Fp8RowCodes& q);

}  // namespace mt::cuda
