#pragma once
// RoPE's per-pair math, shared by the CPU reference (cpu.cpp) and the CUDA kernel (cuda.cu), so the
// formula a GPU runs is the one the CPU tests check. The global pow/cos/sin are glibc's on the host
// and CUDA's on the device (in double, so their float results differ only where a double's last bit
// moves a float rounding, rarely); the products are rounded alone on both, so the rest is bitwise.
#include <math.h>

#include "ops/host_device.hpp"

namespace mt {

// a * b rounded to nearest on its own. nvcc fuses a product and the add or subtract after it into one
// fma (one rounding fewer) and the host build does not (no FMA in x86-64's baseline), which moved
// near-zero results of x0 * c - x1 * s by many bfloat16 ulps; __fmul_rn/__dmul_rn are never fused.
template <class T>
MT_HD inline T rope_mul(T a, T b) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(T) == sizeof(float)) return __fmul_rn(a, b);
  else return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// YaRN, RoPE scaled for contexts beyond the one trained (DeepSeek-V3 report §4.3; Peng et al.
// 2023): pair i's frequency theta^(-2i/rot_dim) is kept for pairs that turn more than beta_fast
// times over original_seq_len positions, divided by `factor` for those that turn less than
// beta_slow times, and blended linearly between; cos and sin are multiplied by `magnitude`.
// factor 1: plain RoPE.
struct RopeScaling {
  float factor = 1.0f;
  int original_seq_len = 0;
  float beta_fast = 32.0f, beta_slow = 1.0f;
  float magnitude = 1.0f;
};

// The frequency of pair `pair` (radians per position).
MT_HD inline double rope_frequency(int pair, int rot_dim, float theta, const RopeScaling& y) {
  const double freq = pow(double(theta), -2.0 * pair / rot_dim);
  if (y.factor <= 1.0f) return freq;
  // The pair index at which the frequency turns `turns` times over the original context.
  const double two_pi = 6.283185307179586, log_theta = log(double(theta));
  auto pair_turning = [&](double turns) {
    return rot_dim * log(y.original_seq_len / (turns * two_pi)) / (2.0 * log_theta);
  };
  const double low = fmax(floor(pair_turning(y.beta_fast)), 0.0);
  double high = fmin(ceil(pair_turning(y.beta_slow)), double(rot_dim - 1));
  if (high == low) high += 0.001;
  const double ramp = fmin(fmax((pair - low) / (high - low), 0.0), 1.0);  // 0: kept, 1: interpolated
  return rope_mul(freq, 1.0 - ramp) + rope_mul(freq / y.factor, ramp);
}

// cos and sin of RoPE's angle pos * frequency for one position and pair, times the scaling's
// magnitude. The angle is computed in double and rounded once, so long sequences keep accurate
// phases; inverse negates sin (with the magnitude, the transpose of the forward map).
MT_HD inline void rope_cos_sin(int pos, int pair, int rot_dim, float theta, const RopeScaling& y, bool inverse,
                                        float* c, float* s) {
  const double angle = pos * rope_frequency(pair, rot_dim, theta, y);
  *c = float(y.magnitude * cos(angle));
  *s = float(y.magnitude * (inverse ? -sin(angle) : sin(angle)));
}

// Rotates the interleaved pair (x[0], x[1]) by the angle with cosine c and sine s.
MT_HD inline void rope_rotate(float* x, float c, float s) {
  const float x0 = x[0], x1 = x[1];
  x[0] = rope_mul(x0, c) - rope_mul(x1, s);
  x[1] = rope_mul(x0, s) + rope_mul(x1, c);
}

}  // namespace mt
