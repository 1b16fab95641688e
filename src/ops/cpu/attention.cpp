// Causal attention, one (sequence, head) at a time, with BLAS for the four products. Scores
// and probabilities of a head form a [seq, seq] matrix; rows only keep columns <= their own
// position (the full square is multiplied: at these sizes BLAS on the square beats loops on
// the triangle).
#include <cblas.h>

#include <cmath>
#include <vector>

#include "ops/cpu/cpu_ops.hpp"

namespace mt::cpu {

namespace {
// Offset of (sequence b, position 0, head h) in a [batch*seq, heads, dim] tensor.
inline size_t head_offset(int b, int h, int seq, int heads, int dim) { return (size_t(b) * seq * heads + h) * dim; }
}  // namespace

void attention_forward(DeviceState*, const AttentionForwardArgs& a) {
  const int T = a.seq, H = a.heads, ldq = H * a.qk_dim, ldv = H * a.v_dim;
  for (int b = 0; b < a.batch; ++b)
    for (int h = 0; h < H; ++h) {
      float* P = a.probs + (size_t(b) * H + h) * T * T;
      const float* q = a.q + head_offset(b, h, T, H, a.qk_dim);
      const float* k = a.k + head_offset(b, h, T, H, a.qk_dim);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, a.qk_dim, a.scale, q, ldq, k, ldq, 0.0f, P, T);
      for (int t = 0; t < T; ++t) {
        float* p = P + size_t(t) * T;
        float mx = p[0];
        for (int s = 1; s <= t; ++s) mx = std::max(mx, p[s]);
        double sum = 0;
        for (int s = 0; s <= t; ++s) { p[s] = std::exp(p[s] - mx); sum += p[s]; }
        const float inv = float(1.0 / sum);
        for (int s = 0; s <= t; ++s) p[s] *= inv;
        for (int s = t + 1; s < T; ++s) p[s] = 0;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, a.v_dim, T, 1.0f, P, T,
                  a.v + head_offset(b, h, T, H, a.v_dim), ldv, 0.0f, a.out + head_offset(b, h, T, H, a.v_dim), ldv);
    }
}

// dV = P^T dO;  dP = dO V^T;  dS = P (dP - rowsum(P dP)) scale;  dQ = dS K;  dK = dS^T Q.
void attention_backward(DeviceState*, const AttentionBackwardArgs& a) {
  const int T = a.seq, H = a.heads, ldq = H * a.qk_dim, ldv = H * a.v_dim;
  std::vector<float> dS(size_t(T) * T);
  for (int b = 0; b < a.batch; ++b)
    for (int h = 0; h < H; ++h) {
      const float* P = a.probs + (size_t(b) * H + h) * T * T;
      const size_t oq = head_offset(b, h, T, H, a.qk_dim), ov = head_offset(b, h, T, H, a.v_dim);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, a.v_dim, T, 1.0f, P, T, a.dout + ov, ldv, 0.0f,
                  a.dv + ov, ldv);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, a.v_dim, 1.0f, a.dout + ov, ldv, a.v + ov, ldv, 0.0f,
                  dS.data(), T);
      for (int t = 0; t < T; ++t) {
        const float* p = P + size_t(t) * T;
        float* ds = dS.data() + size_t(t) * T;
        double pdp = 0;
        for (int s = 0; s <= t; ++s) pdp += double(p[s]) * ds[s];
        for (int s = 0; s <= t; ++s) ds[s] = p[s] * (ds[s] - float(pdp)) * a.scale;
        for (int s = t + 1; s < T; ++s) ds[s] = 0;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, a.qk_dim, T, 1.0f, dS.data(), T, a.k + oq, ldq, 0.0f,
                  a.dq + oq, ldq);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, a.qk_dim, T, 1.0f, dS.data(), T, a.q + oq, ldq, 0.0f,
                  a.dk + oq, ldq);
    }
}

}  // namespace mt::cpu
