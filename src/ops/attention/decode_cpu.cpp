// One new position's attention over a decoder's cache (AttentionDecodeArgs), plain loops: a
// decoder's row is one query per head, so there is no product worth BLAS.
#include <algorithm>
#include <cmath>

#include "ops/backend/cpu_ops.hpp"

namespace mt::cpu {

void attention_decode(DeviceState*, const AttentionDecodeArgs& a) {
  const int kv_heads = a.kv_heads ? a.kv_heads : a.heads;
  const int group = a.heads / kv_heads, ldk = kv_heads * a.qk_dim, ldv = kv_heads * a.v_dim;
  for (int h = 0; h < a.heads; ++h) {
    const int g = h / group;
    const float* q = a.q + size_t(h) * a.qk_dim;
    float* p = a.scores + size_t(h) * a.length;
    float mx = -INFINITY;
    for (int s = 0; s < a.length; ++s) {
      const float* k = a.k + size_t(s) * ldk + size_t(g) * a.qk_dim;
      float dot = 0;
      for (int f = 0; f < a.qk_dim; ++f) dot += q[f] * k[f];
      p[s] = a.scale * dot;
      mx = std::max(mx, p[s]);
    }
    float sum = 0;
    for (int s = 0; s < a.length; ++s) sum += p[s] = std::exp(p[s] - mx);
    float* out = a.out + size_t(h) * a.v_dim;
    std::fill_n(out, a.v_dim, 0.0f);
    for (int s = 0; s < a.length; ++s) {
      const float w = p[s] / sum;
      const float* v = a.v + size_t(s) * ldv + size_t(g) * a.v_dim;
      for (int f = 0; f < a.v_dim; ++f) out[f] += w * v[f];
    }
  }
}

}  // namespace mt::cpu
