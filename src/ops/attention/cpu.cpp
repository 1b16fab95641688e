// Causal attention, one (sequence, head) at a time, with BLAS for the products. The scores of a
// head form a [seq, seq] matrix that lives only inside the op, one head at a time; rows only keep
// columns <= their own position (the full square is multiplied: at these sizes BLAS on the
// square beats loops on the triangle). Backward recomputes the probabilities from the saved lse.
// Every operand is read and written through its HeadStrides, so heads stay where the layer keeps them.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/bf16.hpp"
#include "ops/backend/cpu_ops.hpp"
#include "util/error.hpp"

namespace mt::cpu {

namespace {

// One operand's view: its strides, and the head that query head h reads (grouped-query sharing).
struct View {
  HeadStrides at;
  int seq, group;
  View(HeadStrides strides, int heads, int dim, int seq_len, int group_size)
      : at(packed_or(strides, heads, dim)), seq(seq_len), group(group_size) {}
  // Offset of (sequence b, position 0, query head h).
  size_t head(int b, int h) const { return size_t(b) * seq * at.row + size_t(h / group) * at.head; }
  // Elements from the first of the view to one past its last, for `rows` tokens of `heads` heads.
  size_t span(size_t rows, int heads, int dim) const {
    return rows == 0 ? 0 : (rows - 1) * at.row + size_t(heads - 1) * at.head + dim;
  }
};

// A product's operand as the products see it: itself in fp32; else a bfloat16-rounded copy, or
// the widened values of one stored in bfloat16 (x16). n: the elements its view spans.
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

int kv_heads_of(int heads, int kv_heads) { return kv_heads > 0 ? kv_heads : heads; }

}  // namespace

void attention_forward(DeviceState*, const AttentionForwardArgs& a) {
  if (a.batch == 0 || a.seq == 0 || a.heads == 0) return;
  const int T = a.seq, H = a.heads, KV = kv_heads_of(H, a.kv_heads), group = H / KV;
  const bool bf16 = a.inputs != GemmPrecision::fp32;
  MT_CHECK((!a.q_bf16 && !a.k_bf16 && !a.v_bf16) || bf16);
  MT_CHECK(H % KV == 0);
  const size_t rows = size_t(a.batch) * T;
  const View vq(a.q_at, H, a.qk_dim, T, 1), vk(a.k_at, KV, a.qk_dim, T, group), vv(a.v_at, KV, a.v_dim, T, group),
      vo(a.out_at, H, a.v_dim, T, 1);
  const Operand Q(a.q, vq.span(rows, H, a.qk_dim), bf16, a.q_bf16), K(a.k, vk.span(rows, KV, a.qk_dim), bf16, a.k_bf16),
      V(a.v, vv.span(rows, KV, a.v_dim), bf16, a.v_bf16);
  std::vector<float> P(size_t(T) * T);
  for (int b = 0; b < a.batch; ++b)
    for (int h = 0; h < H; ++h) {
      const float* q = Q.get() + vq.head(b, h);
      const float* k = K.get() + vk.head(b, h);
      float* lse = a.lse + (size_t(b) * H + h) * T;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, a.qk_dim, a.scale, q, vq.at.row, k, vk.at.row, 0.0f,
                  P.data(), T);
      for (int t = 0; t < T; ++t) {
        float* p = P.data() + size_t(t) * T;
        float mx = p[0];
        for (int s = 1; s <= t; ++s) mx = std::max(mx, p[s]);
        if (a.max_logit) a.max_logit[h] = std::max(a.max_logit[h], mx);
        double sum = 0;
        for (int s = 0; s <= t; ++s) { p[s] = std::exp(p[s] - mx); sum += p[s]; }
        lse[t] = float(mx + std::log(sum));
        const float inv = float(1.0 / sum);
        for (int s = 0; s <= t; ++s) p[s] *= inv;
        for (int s = t + 1; s < T; ++s) p[s] = 0;
      }
      Operand::round(P.data(), P.size(), bf16);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, a.v_dim, T, 1.0f, P.data(), T, V.get() + vv.head(b, h),
                  vv.at.row, 0.0f, a.out + vo.head(b, h), vo.at.row);
    }
  if (a.out_fp8.codes) {
    MT_CHECK(vo.at.row == H * a.v_dim);
    fp8_code_rows(a.out, int(rows), H * a.v_dim, a.out_fp8);
  }
}

namespace {

// dst (+)= src for a [rows, cols] head slice: a grouped key/value head's gradient is the sum of
// its query heads' in head order, the first one written, the rest added.
void put(float* dst, int ld_dst, const float* src, int ld_src, int rows, int cols, bool add) {
  for (int r = 0; r < rows; ++r) {
    float* d = dst + size_t(r) * ld_dst;
    const float* s = src + size_t(r) * ld_src;
    for (int c = 0; c < cols; ++c) d[c] = add ? d[c] + s[c] : s[c];
  }
}

// P = exp(scale Q K^T - lse);  dV = P^T dO;  dP = dO V^T;  dS = P (dP - D) scale with
// D = rowsum(dO * O) (= rowsum(P * dP), without the square);  dQ = dS K;  dK = dS^T Q.
// bf16: the probabilities and score gradients are rounded where they enter products, after D and
// dS are formed from the unrounded probabilities (as a tiled kernel does from its fp32 tiles).
struct Backward {
  const AttentionBackwardArgs& a;
  int T, H, KV, group;
  bool bf16;
  View vq, vk, vv, vo, vdq, vdk, vdv;
  size_t rows;
  Operand Q, K, V, dO;
  std::vector<float> P, Pr, dS, dk_head, dv_head;

  explicit Backward(const AttentionBackwardArgs& args)
      : a(args), T(a.seq), H(a.heads), KV(kv_heads_of(H, a.kv_heads)), group(H / KV),
        bf16(a.inputs != GemmPrecision::fp32), vq(a.q_at, H, a.qk_dim, T, 1), vk(a.k_at, KV, a.qk_dim, T, group),
        vv(a.v_at, KV, a.v_dim, T, group), vo(a.out_at, H, a.v_dim, T, 1), vdq(a.dq_at, H, a.qk_dim, T, 1),
        vdk(a.dk_at, KV, a.qk_dim, T, group), vdv(a.dv_at, KV, a.v_dim, T, group), rows(size_t(a.batch) * T),
        Q(a.q, vq.span(rows, H, a.qk_dim), bf16, a.q_bf16), K(a.k, vk.span(rows, KV, a.qk_dim), bf16, a.k_bf16),
        V(a.v, vv.span(rows, KV, a.v_dim), bf16, a.v_bf16), dO(a.dout, vo.span(rows, H, a.v_dim), bf16),
        P(size_t(T) * T), Pr(bf16 ? P.size() : 0), dS(size_t(T) * T),
        dk_head(group > 1 ? size_t(T) * a.qk_dim : 0), dv_head(group > 1 ? size_t(T) * a.v_dim : 0) {}

  void probabilities(int b, int h) {
    const float* lse = a.lse + (size_t(b) * H + h) * T;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, a.qk_dim, a.scale, Q.get() + vq.head(b, h), vq.at.row,
                K.get() + vk.head(b, h), vk.at.row, 0.0f, P.data(), T);
    for (int t = 0; t < T; ++t) {
      float* p = P.data() + size_t(t) * T;
      for (int s = 0; s <= t; ++s) p[s] = std::exp(p[s] - lse[t]);
      for (int s = t + 1; s < T; ++s) p[s] = 0;
    }
  }

  void score_grads(int b, int h) {
    const size_t oo = vo.head(b, h);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, a.v_dim, 1.0f, dO.get() + oo, vo.at.row,
                V.get() + vv.head(b, h), vv.at.row, 0.0f, dS.data(), T);
    for (int t = 0; t < T; ++t) {
      const float* p = P.data() + size_t(t) * T;
      const float* dout = a.dout + oo + size_t(t) * vo.at.row;
      const float* out = a.out + oo + size_t(t) * vo.at.row;
      float* ds = dS.data() + size_t(t) * T;
      double d = 0;
      for (int i = 0; i < a.v_dim; ++i) d += double(dout[i]) * out[i];
      for (int s = 0; s <= t; ++s) ds[s] = p[s] * (ds[s] - float(d)) * a.scale;
      for (int s = t + 1; s < T; ++s) ds[s] = 0;
    }
    Operand::round(dS.data(), dS.size(), bf16);
  }

  void head(int b, int h) {
    probabilities(b, h);
    const float* p_in = P.data();
    if (bf16) {
      Pr = P;
      Operand::round(Pr.data(), Pr.size(), true);
      p_in = Pr.data();
    }
    // Ungrouped heads write their gradients in place; grouped ones go through a head's buffer.
    const bool own = group == 1, add = h % group != 0;
    float* dv = own ? a.dv + vdv.head(b, h) : dv_head.data();
    const int ldv = own ? vdv.at.row : a.v_dim;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, a.v_dim, T, 1.0f, p_in, T, dO.get() + vo.head(b, h),
                vo.at.row, 0.0f, dv, ldv);
    score_grads(b, h);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, a.qk_dim, T, 1.0f, dS.data(), T, K.get() + vk.head(b, h),
                vk.at.row, 0.0f, a.dq + vdq.head(b, h), vdq.at.row);
    float* dk = own ? a.dk + vdk.head(b, h) : dk_head.data();
    const int ldk = own ? vdk.at.row : a.qk_dim;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, a.qk_dim, T, 1.0f, dS.data(), T, Q.get() + vq.head(b, h),
                vq.at.row, 0.0f, dk, ldk);
    if (own) return;
    put(a.dv + vdv.head(b, h), vdv.at.row, dv, ldv, T, a.v_dim, add);
    put(a.dk + vdk.head(b, h), vdk.at.row, dk, ldk, T, a.qk_dim, add);
  }
};

}  // namespace

void attention_backward(DeviceState*, const AttentionBackwardArgs& a) {
  if (a.batch == 0 || a.seq == 0 || a.heads == 0) return;
  MT_CHECK((!a.q_bf16 && !a.k_bf16 && !a.v_bf16) || a.inputs != GemmPrecision::fp32);
  MT_CHECK(a.heads % kv_heads_of(a.heads, a.kv_heads) == 0);
  Backward run(a);
  for (int b = 0; b < a.batch; ++b)
    for (int h = 0; h < a.heads; ++h) run.head(b, h);
}

}  // namespace mt::cpu
