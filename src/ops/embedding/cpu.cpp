// The CPU reference of the embedding ops (the CUDA kernels: cuda.cu).
#include <algorithm>

#include "ops/backend/cpu_ops.hpp"

namespace mt::cpu {

void embedding_forward(DeviceState*, const EmbeddingForwardArgs& a) {
  for (int r = 0; r < a.rows; ++r) {
    const float* src = a.table + size_t(a.tokens[r]) * a.dim;
    std::copy(src, src + a.dim, a.out + size_t(r) * a.dim);
  }
}

void embedding_backward(DeviceState*, const EmbeddingBackwardArgs& a) {
  for (int r = 0; r < a.rows; ++r) {
    float* dst = a.dtable + size_t(a.tokens[r]) * a.dim;
    const float* g = a.dout + size_t(r) * a.dim;
    for (int i = 0; i < a.dim; ++i) dst[i] += g[i];
  }
}

}  // namespace mt::cpu
