#pragma once
// How a GEMM runs in FP8 (DeepSeek-V3 report section 3.3): which format each operand takes, how
// operands are cut into scaled pieces, and, for the CPU emulation, how precisely the products
// are summed.
//   activations and output gradients: 1 x `tile` pieces along the product's inner dimension K
//     (per token and per `tile` channels in forward and Dgrad; per channel and per `tile` tokens
//     in Wgrad, where K runs over tokens: the transposed quantization);
//   weights: `block` x `block` squares of the stored matrix;
//   per_tensor: one scale for the whole operand instead (the ablation).
// A piece with largest magnitude amax gets the scale s = amax / max (fp32) or the power of two
// 2^ceil(log2(amax / max)) (pow2_scales: dividing by it is exact, so the fp8 rounding is the
// only error and the CPU and GPU quantize bit for bit); x is stored as fp8(x / s), read back as
// fp8 * s. An all-zero piece has s = 1.
#include "ops/fp8/codes.hpp"

namespace mt {

enum class Fp8Operand { activation, gradient, weight };

struct Fp8Recipe {
  Fp8Format forward = Fp8Format::e4m3;   // activations and weights
  Fp8Format gradient = Fp8Format::e4m3;  // output gradients (Dgrad's and Wgrad's first operand)
  int tile = 128;
  int block = 128;
  bool per_tensor = false;
  bool pow2_scales = true;
  // CPU emulation of the tensor cores' accumulator: 0 sums in fp32; otherwise the running partial
  // sum keeps this many fraction bits (truncated, as Hopper's FP8 accumulation is observed to do)
  // and is added into an fp32 total every promote_every products (0: only at the end).
  int accumulator_bits = 0;
  int promote_every = 128;

  Fp8Format format(Fp8Operand kind) const { return kind == Fp8Operand::gradient ? gradient : forward; }
};

// The scale of a piece whose largest magnitude is amax.
MT_HD inline float fp8_scale(float amax, Fp8Format format, bool pow2) {
  if (!(amax > 0.0f)) return 1.0f;
  const float ratio = amax / fp8_layout(format).max_value;
  if (!pow2) return ratio;
  int e = 0;
  const float m = frexpf(ratio, &e);  // ratio = m 2^e, m in [0.5, 1): the smallest power of two >= ratio
  return ldexpf(1.0f, m == 0.5f ? e - 1 : e);
}

}  // namespace mt
