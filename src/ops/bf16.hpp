#pragma once
// bfloat16 emulation on the CPU: round-to-nearest-even of the top 16 bits of an fp32, the same
// rounding as __float2bfloat16 on the GPU. NaN stays NaN.
#include <cstdint>
#include <cstring>

namespace mt {

inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

inline float bf16_bits_to_float(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float round_to_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }

// A bfloat16 value in device memory: the bits __nv_bfloat16 holds on the GPU.
struct Bf16 {
  uint16_t bits;
};

}  // namespace mt
