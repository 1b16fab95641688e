#pragma once
// FP8 numbers as the GPU's tensor cores read them, shared by the CPU emulation and the CUDA
// kernels. E4M3 ("fn": bias 7, no infinities, largest finite 448, S.1111.111 is NaN) and E5M2
// (bias 15, largest finite 57344, infinities and NaNs as in IEEE). Conversion from fp32 rounds to
// nearest even and saturates out-of-range values and infinities to the largest finite value
// (CUDA's __NV_SATFINITE); NaN stays NaN. In range this is exactly PyTorch's
// `tensor.to(torch.float8_e4m3fn / float8_e5m2)`; PyTorch itself does not saturate (it turns
// overflow into NaN or infinity), so it agrees with ours on `clamp(x, -max, max)`.
#include <math.h>
#include <cstdint>
#include <cstring>

#include "ops/host_device.hpp"

namespace mt {

enum class Fp8Format { e4m3, e5m2 };

struct Fp8Layout {
  int mantissa_bits, bias;
  uint8_t max_code;   // the largest finite magnitude's code
  uint8_t nan_code;   // a NaN's code (sign bit clear)
  float max_value;
};

MT_HD inline Fp8Layout fp8_layout(Fp8Format f) {
  return f == Fp8Format::e4m3 ? Fp8Layout{3, 7, 0x7E, 0x7F, 448.0f} : Fp8Layout{2, 15, 0x7B, 0x7F, 57344.0f};
}

MT_HD inline uint32_t float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}

// Round to nearest, ties to even, then saturate.
MT_HD inline uint8_t float_to_fp8(float x, Fp8Format format) {
  const Fp8Layout f = fp8_layout(format);
  const uint8_t sign = uint8_t((float_bits(x) >> 31) << 7);
  if (x != x) return uint8_t(sign | f.nan_code);  // NaN
  const float a = fabsf(x);
  if (a >= f.max_value) return uint8_t(sign | f.max_code);
  const int m = f.mantissa_bits, min_exponent = 1 - f.bias;
  int e = int((float_bits(a) >> 23) & 0xFF) - 127;  // a's binary exponent (a float subnormal: below min_exponent)
  if (e < min_exponent) e = min_exponent;           // fp8 subnormals share the smallest normal's step
  // a in units of the step 2^(e - m): exact (a power-of-two scaling), then rounded to an integer.
  const float q = rintf(ldexpf(a, m - e));
  // Normal: (e + bias) << m plus the fraction q - 2^m; a carry of q to 2^(m+1) moves into the exponent.
  // Subnormal (e = min_exponent, q < 2^m): exponent field 0, fraction q; q = 2^m is the smallest normal.
  const int code = a < ldexpf(1.0f, min_exponent) ? int(q) : ((e + f.bias) << m) + int(q) - (1 << m);
  return uint8_t(sign | (code > f.max_code ? f.max_code : code));
}

MT_HD inline float fp8_to_float(uint8_t code, Fp8Format format) {
  const Fp8Layout f = fp8_layout(format);
  const int m = f.mantissa_bits;
  const float sign = code & 0x80 ? -1.0f : 1.0f;
  const int magnitude = code & 0x7F, exponent = magnitude >> m, fraction = magnitude & ((1 << m) - 1);
  if (format == Fp8Format::e4m3 && magnitude == 0x7F) return NAN;
  if (format == Fp8Format::e5m2 && exponent == 31) return fraction ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * ldexpf(float(fraction), 1 - f.bias - m);
  return sign * ldexpf(float((1 << m) + fraction), exponent - f.bias - m);
}

// The value x takes after a round trip through the format: fp8_to_float(float_to_fp8(x)), computed
// on x's bits (the CPU emulation's inner loop).
MT_HD inline float round_to_fp8(float x, Fp8Format format) {
  const Fp8Layout f = fp8_layout(format);
  if (x != x) return x;
  const float a = fabsf(x);
  if (a >= f.max_value) return copysignf(f.max_value, x);
  const int min_exponent = 1 - f.bias;
  if (a < ldexpf(1.0f, min_exponent)) {  // the subnormal grid: multiples of 2^(min_exponent - m)
    const int m = f.mantissa_bits;
    return copysignf(ldexpf(rintf(ldexpf(a, m - min_exponent)), min_exponent - m), x);
  }
  // Round the fraction to m bits, ties to even; a carry moves into the exponent.
  const int drop = 23 - f.mantissa_bits;
  uint32_t u = float_bits(x);
  u += (uint32_t(1) << (drop - 1)) - 1 + ((u >> drop) & 1);
  u &= ~((uint32_t(1) << drop) - 1);
  float r;
#ifdef __CUDA_ARCH__
  r = __uint_as_float(u);
#else
  std::memcpy(&r, &u, 4);
#endif
  return fabsf(r) > f.max_value ? copysignf(f.max_value, x) : r;
}

}  // namespace mt
