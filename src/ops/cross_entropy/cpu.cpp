// The CPU reference of the cross-entropy op (the CUDA kernel: cuda.cu).
#include <algorithm>
#include <cmath>

#include "ops/backend/cpu_ops.hpp"

namespace mt::cpu {

void cross_entropy(DeviceState*, const CrossEntropyArgs& a) {
  double total = 0;
  for (int r = 0; r < a.rows; ++r) {
    const float* z = a.logits + size_t(r) * a.vocab;
    float* dz = a.dlogits + size_t(r) * a.vocab;
    const int target = a.targets[r];
    if (target < 0) {
      a.losses[r] = 0;
      std::fill(dz, dz + a.vocab, 0.0f);
      continue;
    }
    float mx = z[0];
    for (int i = 1; i < a.vocab; ++i) mx = std::max(mx, z[i]);
    double sum = 0;
    for (int i = 0; i < a.vocab; ++i) sum += std::exp(double(z[i] - mx));
    const double logsum = std::log(sum) + mx;
    a.losses[r] = float(logsum - z[target]);
    total += logsum - z[target];
    for (int i = 0; i < a.vocab; ++i) dz[i] = a.grad_scale * float(std::exp(double(z[i]) - logsum));
    dz[target] -= a.grad_scale;
  }
  if (a.sum) *a.sum += total / a.divisor;
}

}  // namespace mt::cpu
