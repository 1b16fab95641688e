#pragma once
// Per-element math that the CPU reference (src/ops/cpu/) and the CUDA kernels (kernels/) share, so the
// formula a GPU runs is the one the CPU tests check. Plain C++ for the host compiler; under nvcc the
// same functions are also compiled for the device. The global expf/pow/cos/sin are glibc's on the host
// and CUDA's on the device (results may differ by an ulp or two, within the parity tolerance).
#include <math.h>

#if defined(__CUDACC__)
#define MT_HOST_DEVICE __host__ __device__
#else
#define MT_HOST_DEVICE
#endif

namespace mt {

// SwiGLU's h = silu(g) * u = g sigmoid(g) u.
MT_HOST_DEVICE inline float swiglu(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// Gradients of h = g sig(g) u given dh: dh/du = g sig(g); dh/dg = u sig(g) (1 + g (1 - sig(g))).
MT_HOST_DEVICE inline void swiglu_grad(float g, float u, float dh, float* dgate, float* dup) {
  const float sig = 1.0f / (1.0f + expf(-g));
  *dup = dh * g * sig;
  *dgate = dh * u * sig * (1.0f + g * (1.0f - sig));
}

// cos and sin of RoPE's angle pos * theta^(-2 pair / rot_dim) for one position and pair. The angle is
// computed in double and rounded once, so long sequences keep accurate phases; inverse negates sin.
MT_HOST_DEVICE inline void rope_cos_sin(int pos, int pair, int rot_dim, float theta, bool inverse, float* c,
                                        float* s) {
  const double angle = pos * pow(double(theta), -2.0 * pair / rot_dim);
  *c = float(cos(angle));
  *s = float(inverse ? -sin(angle) : sin(angle));
}

// Rotates the interleaved pair (x[0], x[1]) by the angle with cosine c and sine s.
MT_HOST_DEVICE inline void rope_rotate(float* x, float c, float s) {
  const float x0 = x[0], x1 = x[1];
  x[0] = x0 * c - x1 * s;
  x[1] = x0 * s + x1 * c;
}

}  // namespace mt
