// Causal attention, one (sequence, head) at a time. Scores and probabilities for a head are a
// [seq, seq] matrix; rows only look at columns <= their own position.
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_ops.hpp"

namespace mt::cpu {

namespace {
// Row t, head h of a [batch*seq, heads, dim] tensor.
inline const float* row(const float* base, int b, int t, int h, int seq, int heads, int dim) {
  return base + ((size_t(b) * seq + t) * heads + h) * dim;
}
inline float* row(float* base, int b, int t, int h, int seq, int heads, int dim) {
  return base + ((size_t(b) * seq + t) * heads + h) * dim;
}
}  // namespace

void attention_forward(DeviceState*, const AttentionForwardArgs& a) {
  const int T = a.seq, H = a.heads;
  for (int b = 0; b < a.batch; ++b)
    for (int h = 0; h < H; ++h) {
      float* P = a.probs + (size_t(b) * H + h) * T * T;
      for (int t = 0; t < T; ++t) {
        const float* q = row(a.q, b, t, h, T, H, a.qk_dim);
        float* p = P + size_t(t) * T;
        float mx = -INFINITY;
        for (int s = 0; s <= t; ++s) {
          const float* k = row(a.k, b, s, h, T, H, a.qk_dim);
          float dot = 0;
          for (int d = 0; d < a.qk_dim; ++d) dot += q[d] * k[d];
          p[s] = dot * a.scale;
          mx = std::max(mx, p[s]);
        }
        double sum = 0;
        for (int s = 0; s <= t; ++s) { p[s] = std::exp(p[s] - mx); sum += p[s]; }
        const float inv = float(1.0 / sum);
        for (int s = 0; s <= t; ++s) p[s] *= inv;
        for (int s = t + 1; s < T; ++s) p[s] = 0;
        float* o = row(a.out, b, t, h, T, H, a.v_dim);
        for (int d = 0; d < a.v_dim; ++d) o[d] = 0;
        for (int s = 0; s <= t; ++s) {
          const float* v = row(a.v, b, s, h, T, H, a.v_dim);
          for (int d = 0; d < a.v_dim; ++d) o[d] += p[s] * v[d];
        }
      }
    }
}

// dv_s = sum_t p_ts do_t;  dp_ts = do_t . v_s;  dscore_ts = p_ts (dp_ts - sum_s' p_ts' dp_ts');
// dq_t = scale sum_s dscore_ts k_s;  dk_s = scale sum_t dscore_ts q_t.
void attention_backward(DeviceState*, const AttentionBackwardArgs& a) {
  const int T = a.seq, H = a.heads;
  const size_t rows = size_t(a.batch) * T * H;
  std::fill(a.dq, a.dq + rows * a.qk_dim, 0.0f);
  std::fill(a.dk, a.dk + rows * a.qk_dim, 0.0f);
  std::fill(a.dv, a.dv + rows * a.v_dim, 0.0f);
  std::vector<float> dp(T);
  for (int b = 0; b < a.batch; ++b)
    for (int h = 0; h < H; ++h) {
      const float* P = a.probs + (size_t(b) * H + h) * T * T;
      for (int t = 0; t < T; ++t) {
        const float* p = P + size_t(t) * T;
        const float* dout = row(a.dout, b, t, h, T, H, a.v_dim);
        double pdp = 0;
        for (int s = 0; s <= t; ++s) {
          const float* v = row(a.v, b, s, h, T, H, a.v_dim);
          float* dv = row(a.dv, b, s, h, T, H, a.v_dim);
          float dot = 0;
          for (int d = 0; d < a.v_dim; ++d) { dot += dout[d] * v[d]; dv[d] += p[s] * dout[d]; }
          dp[s] = dot;
          pdp += double(p[s]) * dot;
        }
        const float* q = row(a.q, b, t, h, T, H, a.qk_dim);
        float* dq = row(a.dq, b, t, h, T, H, a.qk_dim);
        for (int s = 0; s <= t; ++s) {
          const float ds = p[s] * (dp[s] - float(pdp)) * a.scale;
          const float* k = row(a.k, b, s, h, T, H, a.qk_dim);
          float* dk = row(a.dk, b, s, h, T, H, a.qk_dim);
          for (int d = 0; d < a.qk_dim; ++d) { dq[d] += ds * k[d]; dk[d] += ds * q[d]; }
        }
      }
    }
}

}  // namespace mt::cpu
