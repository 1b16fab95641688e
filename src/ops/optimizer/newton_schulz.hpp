#pragma once
// Muon's arithmetic, shared by the CPU reference and the CUDA kernels: the momentum and update rules
// of one element and the Newton-Schulz iteration's layout.
//
// The iteration on one [rows, cols] matrix M, fp32 values (products as NewtonSchulzArgs::inputs says):
//   s = min(rows, cols), l = max(rows, cols); X is M, or M^T when rows > cols: [s, l].
//   X *= float(1 / max(|X|_F, eps)), the norm's squares summed in double in element order.
//   `steps` times: A = X X^T [s, s]; B = b A + c (A A) [s, s]; X = a X + B X.
//   Every product sums over its inner index in ascending order in float, each output element on its own
//   (the CPU reference; a GPU's GEMM sums in another order). The result goes back as [rows, cols].
// With the default coefficients the iteration does not converge to the orthogonal factor U V^T of
// M = U S V^T but to U S' V^T with S' about in [0.7, 1.2] (Keller Jordan's quintic, chosen for the
// slope at zero); tests/test_muon.cpp checks that band and the singular vectors.
#include <cstddef>

#include "ops/host_device.hpp"

namespace mt {

// Floats of scratch the iteration needs per matrix: X, the product a X + B X, A and B.
MT_HD inline size_t newton_schulz_work(int rows, int cols) {
  const size_t s = size_t(rows < cols ? rows : cols);
  return 2 * size_t(rows) * size_t(cols) + 2 * s * s;
}

MT_HD inline void muon_momentum_element(float g, float& buf, float& update, float momentum, bool nesterov) {
  buf += (1 - momentum) * (g - buf);
  update = nesterov ? g + momentum * (buf - g) : buf;
}

MT_HD inline void muon_apply_element(float update, float& value, float lr_scaled, float decay) {
  value = value - decay * value - lr_scaled * update;
}

}  // namespace mt
