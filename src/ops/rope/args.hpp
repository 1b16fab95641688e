#pragma once
// Arguments of the rotary position embedding op.
#include "ops/bf16.hpp"
#include "ops/rope/math.hpp"

namespace mt {

// Rotary position embedding on interleaved pairs (2i, 2i+1) of the last `rot_dim` features of
// each head, angle = pos * theta^(-2i/rot_dim), pos = row % seq_len. In place.
// inverse = true rotates by the negative angle, which is the backward pass.
// out_bf16 (the cast fused into the rotation): x is only read, and every feature of each head,
// rotated where the rotation applies, is written there rounded to bfloat16 (same layout).
// x_bf16 in place of x (with out_bf16, another buffer): the input stored in bfloat16 (a GEMM's
// bfloat16 output, precision.bf16_outputs), widened exactly; the rotation is the fp32 one of its values.
// scaling: YaRN (ops/rope/math.hpp), plain RoPE by default.
// Row r is at position first_position + r % seq_len (a decoder's new rows start after its cache).
struct RopeArgs {
  int rows = 0, heads = 0, head_dim = 0, rot_offset = 0, rot_dim = 0, seq_len = 0, first_position = 0;
  float theta = 10000.0f; bool inverse = false;
  float* x = nullptr;  // [rows, heads, head_dim]
  Bf16* out_bf16 = nullptr;
  RopeScaling scaling = {};
  const Bf16* x_bf16 = nullptr;
};

}  // namespace mt
