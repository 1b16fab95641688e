#pragma once
// FP8 quantization of one GEMM operand on the GPU, bit for bit as the CPU emulation does it
// (codes.hpp, recipe.hpp), into the forms cuBLASLt reads.
//
// An operand is seen as a matrix [outer, k], k being the product's inner dimension, stored either
// [outer, k] (k contiguous) or [k, outer]. Hopper's FP8 matmul takes only K-contiguous operands
// (the "TN" form), so the codes are always written [outer_pad, k_pad], transposing on the way
// when the storage is [k, outer]; the padding (zero codes) gives the 16-byte leading dimension and
// the multiple-of-4 outer size that cuBLASLt's FP8 and block-scaled kernels require.
#include <cstdint>

#include "ops/backend/cuda_state.cuh"
#include "ops/fp8/args.hpp"

namespace mt::cuda {

// The padded shape of the codes: kFp8PadK, kFp8PadOuter (ops/fp8/args.hpp).

struct Fp8View {
  const float* x = nullptr;
  int outer = 0, k = 0;
  bool k_contiguous = true;     // stored [outer, k]; otherwise [k, outer]
  int piece_outer = 1, piece_k = 1;  // one scaled piece, in the [outer, k] view
  Fp8Format format = Fp8Format::e4m3;
  bool pow2 = true;

  int pieces_outer() const { return (outer + piece_outer - 1) / piece_outer; }
  int pieces_k() const { return (k + piece_k - 1) / piece_k; }
  size_t pieces() const { return size_t(pieces_outer()) * pieces_k(); }
};

// The view of an operand of `kind` under `recipe` (the pieces of recipe.hpp, turned into the
// [outer, k] view: a 1 x tile piece along K, a block x block square, or the whole operand).
Fp8View fp8_view(const Fp8Recipe& recipe, Fp8Operand kind, const float* x, int outer, int k, bool k_contiguous);

// The scale of every piece, row-major over the [pieces_outer, pieces_k] grid (`scales` holds
// v.pieces() floats).
void fp8_piece_scales(DeviceState* s, const Fp8View& v, float* scales);

// codes[outer_pad, k_pad] = fp8(x / scale of its piece), zero in the padding.
void fp8_quantize_codes(DeviceState* s, const Fp8View& v, const float* piece_scales, uint8_t* codes, int outer_pad,
                        int k_pad);

// cuBLASLt's scale tensors, for an operand whose pieces the mode can express (fp8_expressible):
//   vec128:  one scale per row and 128 columns of K, [ceil(k/128)][outer_pad] (outer contiguous);
//   blk128:  one per 128 x 128 square, [ceil(outer_pad/128)][roundup(ceil(k/128), 4)] (K contiguous).
// Rows of the padding get scale 1 (their codes are zero).
enum class Fp8Scaling { scalar, vec128, blk128 };
bool fp8_expressible(const Fp8View& v, Fp8Scaling mode);
size_t fp8_scale_count(const Fp8View& v, Fp8Scaling mode, int outer_pad);
void fp8_cublas_scales(DeviceState* s, const Fp8View& v, const float* piece_scales, Fp8Scaling mode, int outer_pad,
                       float* out);

// out (the operand's own storage layout) = fp8(x / scale) * scale: the values the CPU emulation
// multiplies, for GEMMs that cuBLASLt cannot run in FP8.
void fp8_dequantized_copy(DeviceState* s, const Fp8View& v, const float* piece_scales, float* out);

}  // namespace mt::cuda
