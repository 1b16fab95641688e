// Causal attention, one (sequence, head) at a time, with BLAS for the products. The scores of a
// head form a [seq, seq] matrix that lives only inside the op, one head at a time; rows only keep
// columns <= their own position (the full square is multiplied: at these sizes BLAS on the
// square beats loops on the triangle). Backward recomputes the probabilities from the saved lse.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/bf16.hpp"
#include "ops/backend/cpu_ops.hpp"
#include "util/error.hpp"

namespace mt::cpu {

namespace {
// Offset of (sequence b, position 0, head h) in a [batch*seq, heads, dim] tensor.
inline size_t head_offset(int b, int h, int seq, int heads, int dim) { return (size_t(b) * seq * heads + h) * dim; }

// A product's operand as the products see it: itself in fp32; else a bfloat16-rounded copy, or
// the widened values of one stored in bfloat16 (x16).
class Operand {
 public:
  Operand(const float* x, size_t n, bool bf16, const Bf16* x16 = nullptr) : p_(x) {
    if (x16) {
      copy_.resize(n);
      for (size_t i = 0; i < n; ++i) copy_[i] = bf16_bits_to_float(x16[i].bits);
    } else if (bf16) {
      copy_.assign(x, x + n);
      round(copy_.data(), n, true);
    } else {
      return;
    }
    p_ = copy_.data();
  }
  const float* get() const { return p_; }
  static void round(float* x, size_t n, bool bf16) {
    if (bf16)
      for (size_t i = 0; i < n; ++i) x[i] = round_to_bf16(x[i]);
  }

 private:
  const float* p_;
  std::vector<float> copy_;
};
}  // namespace

void attention_forward(DeviceState*, const AttentionForwardArgs& a) {
  const int T = a.seq, H = a.heads, ldq = H * a.qk_dim, ldv = H * a.v_dim;
  const bool bf16 = a.inputs != GemmPrecision::fp32;
  MT_CHECK((!a.q_bf16 && !a.k_bf16 && !a.v_bf16) || bf16);
  const size_t rows = size_t(a.batch) * T;
  const Operand Q(a.q, rows * ldq, bf16, a.q_bf16), K(a.k, rows * ldq, bf16, a.k_bf16),
      V(a.v, rows * ldv, bf16, a.v_bf16);
  std::vector<float> P(size_t(T) * T);
  for (int b = 0; b < a.batch; ++b)
    for (int h = 0; h < H; ++h) {
      const float* q = Q.get() + head_offset(b, h, T, H, a.qk_dim);
      const float* k = K.get() + head_offset(b, h, T, H, a.qk_dim);
      float* lse = a.lse + (size_t(b) * H + h) * T;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, a.qk_dim, a.scale, q, ldq, k, ldq, 0.0f, P.data(), T);
      for (int t = 0; t < T; ++t) {
        float* p = P.data() + size_t(t) * T;
        float mx = p[0];
        for (int s = 1; s <= t; ++s) mx = std::max(mx, p[s]);
        double sum = 0;
        for (int s = 0; s <= t; ++s) { p[s] = std::exp(p[s] - mx); sum += p[s]; }
        lse[t] = float(mx + std::log(sum));
        const float inv = float(1.0 / sum);
        for (int s = 0; s <= t; ++s) p[s] *= inv;
        for (int s = t + 1; s < T; ++s) p[s] = 0;
      }
      Operand::round(P.data(), P.size(), bf16);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, a.v_dim, T, 1.0f, P.data(), T,
                  V.get() + head_offset(b, h, T, H, a.v_dim), ldv, 0.0f, a.out + head_offset(b, h, T, H, a.v_dim), ldv);
    }
}

// P = exp(scale Q K^T - lse);  dV = P^T dO;  dP = dO V^T;  dS = P (dP - D) scale with
// D = rowsum(dO * O) (= rowsum(P * dP), without the square);  dQ = dS K;  dK = dS^T Q.
// bf16: the probabilities and score gradients are rounded where they enter products, after D and
// dS are formed from the unrounded probabilities (as a tiled kernel does from its fp32 tiles).
void attention_backward(DeviceState*, const AttentionBackwardArgs& a) {
  const int T = a.seq, H = a.heads, ldq = H * a.qk_dim, ldv = H * a.v_dim;
  const bool bf16 = a.inputs != GemmPrecision::fp32;
  MT_CHECK((!a.q_bf16 && !a.k_bf16 && !a.v_bf16) || bf16);
  const size_t rows = size_t(a.batch) * T;
  const Operand Q(a.q, rows * ldq, bf16, a.q_bf16), K(a.k, rows * ldq, bf16, a.k_bf16),
      V(a.v, rows * ldv, bf16, a.v_bf16);
  const Operand dO(a.dout, rows * ldv, bf16);
  std::vector<float> P(size_t(T) * T), Pr(bf16 ? P.size() : 0), dS(size_t(T) * T);
  for (int b = 0; b < a.batch; ++b)
    for (int h = 0; h < H; ++h) {
      const size_t oq = head_offset(b, h, T, H, a.qk_dim), ov = head_offset(b, h, T, H, a.v_dim);
      const float* lse = a.lse + (size_t(b) * H + h) * T;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, a.qk_dim, a.scale, Q.get() + oq, ldq, K.get() + oq,
                  ldq, 0.0f, P.data(), T);
      for (int t = 0; t < T; ++t) {
        float* p = P.data() + size_t(t) * T;
        for (int s = 0; s <= t; ++s) p[s] = std::exp(p[s] - lse[t]);
        for (int s = t + 1; s < T; ++s) p[s] = 0;
      }
      const float* p_in = P.data();
      if (bf16) {
        Pr = P;
        Operand::round(Pr.data(), Pr.size(), true);
        p_in = Pr.data();
      }
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, a.v_dim, T, 1.0f, p_in, T, dO.get() + ov, ldv, 0.0f,
                  a.dv + ov, ldv);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, a.v_dim, 1.0f, dO.get() + ov, ldv, V.get() + ov, ldv,
                  0.0f, dS.data(), T);
      for (int t = 0; t < T; ++t) {
        const float* p = P.data() + size_t(t) * T;
        const float* dout = a.dout + ov + size_t(t) * ldv;
        const float* out = a.out + ov + size_t(t) * ldv;
        float* ds = dS.data() + size_t(t) * T;
        double d = 0;
        for (int i = 0; i < a.v_dim; ++i) d += double(dout[i]) * out[i];
        for (int s = 0; s <= t; ++s) ds[s] = p[s] * (ds[s] - float(d)) * a.scale;
        for (int s = t + 1; s < T; ++s) ds[s] = 0;
      }
      Operand::round(dS.data(), dS.size(), bf16);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, a.qk_dim, T, 1.0f, dS.data(), T, K.get() + oq, ldq,
                  0.0f, a.dq + oq, ldq);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, a.qk_dim, T, 1.0f, dS.data(), T, Q.get() + oq, ldq,
                  0.0f, a.dk + oq, ldq);
    }
}

}  // namespace mt::cpu
