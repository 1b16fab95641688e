#pragma once
// Arguments of the elementwise ops: SwiGLU, column copies and adds.
#include <cstddef>

#include "ops/bf16.hpp"
#include "ops/fp8/row_codes.hpp"

namespace mt {

// h = silu(gate) * up, elementwise over n values; h_bf16 in place of h: rounded to bfloat16.
// fp8 (codes set, with h): h as rows of `cols` values, their FP8 codes and scales as well.
// gate_bf16, up_bf16 in place of gate, up: the inputs stored in bfloat16 (bf16 GEMM outputs), widened
// exactly to fp32, so the arithmetic is the fp32 one of their values.
struct SwigluForwardArgs {
  size_t n = 0; const float* gate = nullptr; const float* up = nullptr; float* h = nullptr;
  Bf16* h_bf16 = nullptr;
  int cols = 0;
  Fp8RowCodes fp8 = {};
  const Bf16* gate_bf16 = nullptr;
  const Bf16* up_bf16 = nullptr;
};
// The gradients are fp32 (dgate, dup), also from bfloat16 inputs.
// dgate_fp8, dup_fp8 (codes set): the gradients as rows of `cols` values, their FP8 codes and scales
// as well (the input gradients' GEMMs read them; ops/fp8/row_codes.hpp).
struct SwigluBackwardArgs {
  size_t n = 0; const float* gate = nullptr; const float* up = nullptr; const float* dh = nullptr;
  float* dgate = nullptr; float* dup = nullptr;
  int cols = 0;
  Fp8RowCodes dgate_fp8 = {}, dup_fp8 = {};
  const Bf16* gate_bf16 = nullptr;  // as SwigluForwardArgs: the kept inputs in bfloat16
  const Bf16* up_bf16 = nullptr;
  // dh in bfloat16 in place of dh (a Dgrad GEMM's output written so, precision.bf16_outputs), widened exactly.
  const Bf16* dh_bf16 = nullptr;
};

// dst[r, 0:cols] (= or +=) src[r, 0:cols] for r < rows; both are column windows of row-major
// matrices with the given row strides. Splits and joins per-head slices (MLA's [nope; rope]
// keys) without a device-specific loop in the layers.
// dst_bf16 in place of dst: the columns rounded to bfloat16 as they are written (not accumulated).
// `groups` windows at once (every head in one op): group g reads src + g * src_group and writes
// dst + g * dst_group. dst_group 0 sums the groups into one window in group order (the first
// written unless accumulate, the rest added), as separate calls in that order would.
struct CopyColumnsArgs {
  int rows = 0, cols = 0;
  const float* src = nullptr; int src_stride = 0;
  float* dst = nullptr; int dst_stride = 0;
  bool accumulate = false;
  Bf16* dst_bf16 = nullptr;
  int groups = 1, src_group = 0, dst_group = 0;
};

// y += x (n values); y_bf16 set: y's addend read from there (a GEMM's bfloat16 output, widened
// exactly) and the fp32 sum written to y.
struct AddArgs { size_t n = 0; const float* x = nullptr; float* y = nullptr; const Bf16* y_bf16 = nullptr; };

}  // namespace mt
