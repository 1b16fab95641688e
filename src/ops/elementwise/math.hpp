#pragma once
// SwiGLU's per-element math, shared by the CPU reference (cpu.cpp) and the CUDA kernel (cuda.cu).
// expf is glibc's on the host and CUDA's on the device (within the parity tolerance).
#include <math.h>

#include <cstddef>
#include <cstdint>

#include "ops/bf16.hpp"
#include "ops/host_device.hpp"

namespace mt {

// Element i of an input stored in fp32 (f) or, where bf16 is set, in bfloat16, widened exactly.
MT_HD inline float input_at(const float* f, const Bf16* bf16, size_t i) {
  if (!bf16) return f[i];
#ifdef __CUDA_ARCH__
  return __uint_as_float(uint32_t(bf16[i].bits) << 16);
#else
  return bf16_bits_to_float(bf16[i].bits);
#endif
}

// SwiGLU's h = silu(g) * u = g sigmoid(g) u.
MT_HD inline float swiglu(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// Gradients of h = g sig(g) u given dh: dh/du = g sig(g); dh/dg = u sig(g) (1 + g (1 - sig(g))).
MT_HD inline void swiglu_grad(float g, float u, float dh, float* dgate, float* dup) {
  const float sig = 1.0f / (1.0f + expf(-g));
  *dup = dh * g * sig;
  *dgate = dh * u * sig * (1.0f + g * (1.0f - sig));
}

}  // namespace mt
