#pragma once
// An independent float64 implementation of the model, written as plainly as possible (loops,
// no BLAS, no op table, no saved state). Tests compare moetrain's forward pass against it and
// its gradients against central finite differences of it.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/params.hpp"

namespace naive {

using Vec = std::vector<double>;

struct Weights {
  std::map<std::string, Vec> p;  // by parameter name
  std::map<std::string, Vec> buffers;
  const Vec& operator[](const std::string& n) const { return p.at(n); }
};

inline Weights from_store(const mt::ParamStore& s) {
  Weights w;
  const std::vector<float> values = s.host_values();
  for (auto& info : s.infos) w.p[info.name] = Vec(values.begin() + info.offset, values.begin() + info.offset + info.numel);
  for (size_t i = 0; i < s.buffer_names.size(); ++i) {
    const std::vector<float> b = s.host_buffer(int(i));
    w.buffers[s.buffer_names[i]] = Vec(b.begin(), b.end());
  }
  return w;
}

// y[r][o] = sum_i x[r][i] W[o][i]
inline Vec linear(const Vec& x, const Vec& W, int rows, int in, int out, size_t w_offset = 0) {
  Vec y(size_t(rows) * out, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double s = 0;
      for (int i = 0; i < in; ++i) s += x[size_t(r) * in + i] * W[w_offset + size_t(o) * in + i];
      y[size_t(r) * out + o] = s;
    }
  return y;
}

inline Vec rmsnorm(const Vec& x, const Vec& w, int rows, int dim, double eps) {
  Vec y(x.size());
  for (int r = 0; r < rows; ++r) {
    double ms = 0;
    for (int i = 0; i < dim; ++i) ms += x[size_t(r) * dim + i] * x[size_t(r) * dim + i];
    ms /= dim;
    for (int i = 0; i < dim; ++i) y[size_t(r) * dim + i] = x[size_t(r) * dim + i] / std::sqrt(ms + eps) * w[i];
  }
  return y;
}

inline double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

inline Vec swiglu(const Vec& x, const Vec& wg, const Vec& wu, const Vec& wd, int rows, int dim, int hidden,
                  size_t off_gu = 0, size_t off_d = 0) {
  Vec a = linear(x, wg, rows, dim, hidden, off_gu), b = linear(x, wu, rows, dim, hidden, off_gu);
  for (size_t i = 0; i < a.size(); ++i) a[i] = a[i] * sigmoid(a[i]) * b[i];
  return linear(a, wd, rows, hidden, dim, off_d);
}

// Rotates interleaved pairs of features [offset, offset+rot) of each head (width `width`) by
// pos * theta^(-2i/rot), pos = row % seq.
inline void rope_part(Vec& x, int rows, int heads, int width, int offset, int rot, int seq, double theta) {
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < rot / 2; ++i) {
        double ang = (r % seq) * std::pow(theta, -2.0 * i / rot);
        double& x0 = x[(size_t(r) * heads + h) * width + offset + 2 * i];
        double& x1 = x[(size_t(r) * heads + h) * width + offset + 2 * i + 1];
        double a = x0 * std::cos(ang) - x1 * std::sin(ang), b = x0 * std::sin(ang) + x1 * std::cos(ang);
        x0 = a;
        x1 = b;
      }
}

inline void rope(Vec& x, int rows, int heads, int hd, int seq, double theta) {
  rope_part(x, rows, heads, hd, 0, hd, seq, theta);
}

// Causal attention: q, k [batch*seq, heads*qk], v [batch*seq, heads*vd] -> [batch*seq, heads*vd].
inline Vec causal_attention(const Vec& q, const Vec& k, const Vec& v, int batch, int seq, int heads, int qk, int vd,
                            double scale) {
  Vec o(size_t(batch) * seq * heads * vd, 0.0);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int t = 0; t < seq; ++t) {
        Vec sc(t + 1);
        for (int s = 0; s <= t; ++s) {
          double d = 0;
          for (int i = 0; i < qk; ++i)
            d += q[(size_t(b * seq + t) * heads + h) * qk + i] * k[(size_t(b * seq + s) * heads + h) * qk + i];
          sc[s] = d * scale;
        }
        double mx = *std::max_element(sc.begin(), sc.end()), z = 0;
        for (double& e : sc) { e = std::exp(e - mx); z += e; }
        for (int s = 0; s <= t; ++s)
          for (int i = 0; i < vd; ++i)
            o[(size_t(b * seq + t) * heads + h) * vd + i] += sc[s] / z * v[(size_t(b * seq + s) * heads + h) * vd + i];
      }
  return o;
}

// Log-sum-exp of each row's scaled causal scores, [batch, heads, seq], in float64.
inline Vec causal_attention_lse(const Vec& q, const Vec& k, int batch, int seq, int heads, int qk, double scale) {
  Vec lse(size_t(batch) * heads * seq);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int t = 0; t < seq; ++t) {
        Vec sc(t + 1);
        for (int s = 0; s <= t; ++s) {
          double d = 0;
          for (int i = 0; i < qk; ++i)
            d += q[(size_t(b * seq + t) * heads + h) * qk + i] * k[(size_t(b * seq + s) * heads + h) * qk + i];
          sc[s] = d * scale;
        }
        const double mx = *std::max_element(sc.begin(), sc.end());
        double z = 0;
        for (double e : sc) z += std::exp(e - mx);
        lse[(size_t(b) * heads + h) * seq + t] = mx + std::log(z);
      }
  return lse;
}

inline Vec causal_attention(const Vec& q, const Vec& k, const Vec& v, int batch, int seq, int heads, int hd) {
  return causal_attention(q, k, v, batch, seq, heads, hd, hd, 1.0 / std::sqrt(double(hd)));
}

// Multi-head attention; with n_kv_heads < n_heads, query head h uses key/value head h / group.
inline Vec mha(const Weights& w, const std::string& pre, const Vec& x, const mt::ModelConfig& c, int batch) {
  const int rows = batch * c.seq_len, H = c.n_heads, hd = c.head_dim;
  const int kvh = c.attention.n_kv_heads ? c.attention.n_kv_heads : H, group = H / kvh;
  Vec q = linear(x, w[pre + ".wq"], rows, c.d_model, H * hd);
  Vec k = linear(x, w[pre + ".wk"], rows, c.d_model, kvh * hd), v = linear(x, w[pre + ".wv"], rows, c.d_model, kvh * hd);
  rope(q, rows, H, hd, c.seq_len, c.rope_theta);
  rope(k, rows, kvh, hd, c.seq_len, c.rope_theta);
  Vec kk(size_t(rows) * H * hd), vv(kk.size());
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < hd; ++i) {
        kk[(size_t(r) * H + h) * hd + i] = k[(size_t(r) * kvh + h / group) * hd + i];
        vv[(size_t(r) * H + h) * hd + i] = v[(size_t(r) * kvh + h / group) * hd + i];
      }
  return linear(causal_attention(q, kk, vv, batch, c.seq_len, H, hd), w[pre + ".wo"], rows, H * hd, c.d_model);
}

// Multi-head latent attention, written from the report's equations 1-11.
inline Vec mla(const Weights& w, const std::string& pre, const Vec& x, const mt::ModelConfig& c, int batch) {
  const auto& a = c.attention;
  const int rows = batch * c.seq_len, H = c.n_heads, D = c.d_model, qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
  const int nope = a.qk_nope_head_dim, rp = a.qk_rope_head_dim, vd = a.v_head_dim, kvl = a.kv_lora_rank;
  Vec q;
  if (a.q_lora_rank > 0) {
    Vec cq = rmsnorm(linear(x, w[pre + ".wq_a"], rows, D, a.q_lora_rank), w[pre + ".q_norm"], rows, a.q_lora_rank, c.norm_eps);
    q = linear(cq, w[pre + ".wq_b"], rows, a.q_lora_rank, H * qk);
  } else {
    q = linear(x, w[pre + ".wq"], rows, D, H * qk);
  }
  rope_part(q, rows, H, qk, nope, rp, c.seq_len, c.rope_theta);
  Vec ckv = linear(x, w[pre + ".wkv_a"], rows, D, kvl + rp);
  Vec latent(size_t(rows) * kvl), k_rope(size_t(rows) * rp);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < kvl; ++i) latent[size_t(r) * kvl + i] = ckv[size_t(r) * (kvl + rp) + i];
    for (int i = 0; i < rp; ++i) k_rope[size_t(r) * rp + i] = ckv[size_t(r) * (kvl + rp) + kvl + i];
  }
  rope_part(k_rope, rows, 1, rp, 0, rp, c.seq_len, c.rope_theta);
  Vec kv = linear(rmsnorm(latent, w[pre + ".kv_norm"], rows, kvl, c.norm_eps), w[pre + ".wkv_b"], rows, kvl, H * (nope + vd));
  Vec k(size_t(rows) * H * qk), v(size_t(rows) * H * vd);
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < H; ++h) {
      const double* head = &kv[(size_t(r) * H + h) * (nope + vd)];
      for (int i = 0; i < nope; ++i) k[(size_t(r) * H + h) * qk + i] = head[i];
      for (int i = 0; i < rp; ++i) k[(size_t(r) * H + h) * qk + nope + i] = k_rope[size_t(r) * rp + i];
      for (int i = 0; i < vd; ++i) v[(size_t(r) * H + h) * vd + i] = head[nope + i];
    }
  Vec o = causal_attention(q, k, v, batch, c.seq_len, H, qk, vd, 1.0 / std::sqrt(double(qk)));
  return linear(o, w[pre + ".wo"], rows, H * vd, D);
}

inline Vec attention(const Weights& w, const std::string& pre, const Vec& x, const mt::ModelConfig& c, int batch) {
  return c.attention.kind == mt::AttentionKind::mla ? mla(w, pre, x, c, batch) : mha(w, pre, x, c, batch);
}

// Balance-loss groups: `tokens` consecutive tokens form a group, each group's loss has `weight`
// in the objective (tokens = 0: no balance loss).
struct Balance {
  int tokens = 0;
  double weight = 0;
};

// DeepSeek-V3 routing of `rows` tokens: experts by score + bias within the topk_groups best
// groups (by their two best biased scores), ties to the lower index; gates route_scale * s / sum.
struct Routing {
  std::vector<std::vector<int>> chosen;
  std::vector<Vec> gates;
};
inline Routing route(const Vec& scores, const Vec& bias, int rows, const mt::MoeConfig& m) {
  const int E = m.n_routed_experts, per_group = E / m.n_groups;
  Routing r;
  r.chosen.resize(rows);
  r.gates.resize(rows);
  for (int t = 0; t < rows; ++t) {
    Vec biased(E);
    for (int e = 0; e < E; ++e) biased[e] = scores[size_t(t) * E + e] + bias[e];
    std::vector<bool> allowed(E, true);
    if (m.n_groups > 1) {
      std::vector<std::pair<double, int>> groups;
      for (int g = 0; g < m.n_groups; ++g) {
        Vec in(biased.begin() + g * per_group, biased.begin() + (g + 1) * per_group);
        std::sort(in.rbegin(), in.rend());
        groups.push_back({-(in[0] + (per_group > 1 ? in[1] : 0.0)), g});
      }
      std::sort(groups.begin(), groups.end());
      for (int gi = m.topk_groups; gi < m.n_groups; ++gi)
        for (int i = 0; i < per_group; ++i) allowed[groups[gi].second * per_group + i] = false;
    }
    std::vector<std::pair<double, int>> cand;
    for (int e = 0; e < E; ++e)
      if (allowed[e]) cand.push_back({-biased[e], e});
    std::sort(cand.begin(), cand.end());
    double sum = 0;
    for (int k = 0; k < m.top_k; ++k) {
      r.chosen[t].push_back(cand[k].second);
      sum += scores[size_t(t) * E + cand[k].second];
    }
    for (int e : r.chosen[t]) r.gates[t].push_back(m.route_scale * scores[size_t(t) * E + e] / sum);
  }
  return r;
}

// Returns y; adds weight * alpha * sum_i f_i P_i of every balance group to *aux.
inline Vec moe(const Weights& w, const std::string& pre, const Vec& x, const mt::ModelConfig& c, int batch,
               const Balance& bal, double* aux) {
  const auto& m = c.moe;
  const int rows = batch * c.seq_len, E = m.n_routed_experts, D = c.d_model, H = m.expert_hidden;
  const Vec& bias = w.buffers.at(pre + ".router_bias");
  Vec y(size_t(rows) * D, 0.0);
  if (m.n_shared_experts > 0)
    y = swiglu(x, w[pre + ".shared.w_gate"], w[pre + ".shared.w_up"], w[pre + ".shared.w_down"], rows, D,
               m.n_shared_experts * H);
  Vec logits = linear(x, w[pre + ".router"], rows, D, E);
  Vec scores(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) scores[i] = sigmoid(logits[i]);
  const Routing routes = route(scores, bias, rows, m);
  const std::vector<std::vector<int>>& chosen = routes.chosen;
  for (int t = 0; t < rows; ++t) {
    for (size_t k = 0; k < chosen[t].size(); ++k) {
      const int e = chosen[t][k];
      const double g = routes.gates[t][k];
      Vec xt(x.begin() + size_t(t) * D, x.begin() + size_t(t + 1) * D);
      Vec out = swiglu(xt, w[pre + ".experts.w_gate"], w[pre + ".experts.w_up"], w[pre + ".experts.w_down"], 1, D, H,
                       size_t(e) * H * D, size_t(e) * D * H);
      for (int i = 0; i < D; ++i) y[size_t(t) * D + i] += g * out[i];
    }
  }
  for (int g = 0; bal.tokens > 0 && g < rows / bal.tokens; ++g) {
    const int G = bal.tokens;
    for (int e = 0; e < E; ++e) {
      double f = 0, P = 0;
      for (int t = g * G; t < (g + 1) * G; ++t) {
        f += std::count(chosen[t].begin(), chosen[t].end(), e);
        double total = 0;
        for (int j = 0; j < E; ++j) total += scores[size_t(t) * E + j];
        P += scores[size_t(t) * E + e] / total;
      }
      *aux += bal.weight * m.aux_alpha * (double(E) / (m.top_k * G) * f) * (P / G);
    }
  }
  return y;
}

inline Vec block(const Weights& w, const std::string& pre, bool is_moe, const Vec& x, const mt::ModelConfig& c,
                 int batch, const Balance& bal, double* aux) {
  const int rows = batch * c.seq_len, D = c.d_model;
  Vec h = attention(w, pre + ".attn", rmsnorm(x, w[pre + ".attn_norm"], rows, D, c.norm_eps), c, batch);
  for (size_t i = 0; i < h.size(); ++i) h[i] += x[i];
  Vec n2 = rmsnorm(h, w[pre + ".ffn_norm"], rows, D, c.norm_eps);
  Vec f = !is_moe
              ? swiglu(n2, w[pre + ".ffn.w_gate"], w[pre + ".ffn.w_up"], w[pre + ".ffn.w_down"], rows, D, c.ffn_hidden)
              : moe(w, pre + ".moe", n2, c, batch, bal, aux);
  for (size_t i = 0; i < f.size(); ++i) f[i] += h[i];
  return f;
}

// The balance groups of a global batch of `batch` sequences in micro-batches of `micro_batch`.
inline Balance balance_groups(const mt::ModelConfig& c, int batch, int micro_batch) {
  switch (c.moe.aux_loss) {
    case mt::BalanceLoss::sequence: return {c.seq_len, 1.0 / batch};
    case mt::BalanceLoss::micro_batch: return {c.seq_len * micro_batch, double(micro_batch) / batch};
    case mt::BalanceLoss::global_batch: return {c.seq_len * batch, 1.0};
    case mt::BalanceLoss::none: break;
  }
  return {};
}

// Objective: mean cross-entropy over the batch's tokens + the balance loss averaged over its
// balance groups. The whole global batch goes through at once; only the grouping of the
// balance loss depends on the micro-batches.
inline double loss(const Weights& w, const mt::ModelConfig& c, const std::vector<int>& inputs,
                   const std::vector<int>& targets, int batch, int micro_batch) {
  const int rows = batch * c.seq_len, D = c.d_model, V = c.vocab_size;
  const Balance bal = balance_groups(c, batch, micro_batch);
  Vec x(size_t(rows) * D);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < D; ++i) x[size_t(r) * D + i] = w["embedding"][size_t(inputs[r]) * D + i];
  double aux = 0;
  for (int l = 0; l < c.n_layers; ++l)
    x = block(w, "blocks." + std::to_string(l), l >= c.n_dense_layers, x, c, batch, bal, &aux);
  // Summed cross-entropy of the rows whose target is not negative.
  auto cross_entropy = [&](const Vec& h, const std::string& norm, const std::vector<int>& tg) {
    Vec logits = linear(rmsnorm(h, w[norm], rows, D, c.norm_eps), w["head"], rows, D, V);
    double ce = 0;
    for (int r = 0; r < rows; ++r) {
      if (tg[r] < 0) continue;
      double mx = *std::max_element(logits.begin() + size_t(r) * V, logits.begin() + size_t(r + 1) * V), z = 0;
      for (int v = 0; v < V; ++v) z += std::exp(logits[size_t(r) * V + v] - mx);
      ce += std::log(z) + mx - logits[size_t(r) * V + tg[r]];
    }
    return ce;
  };
  double total = cross_entropy(x, "final_norm", targets) / rows;
  // Multi-token prediction, eqs. 21-25: depth k predicts token i+k+1 from h^{k-1}_i and token i+k.
  const int T = c.seq_len, depth = c.mtp.depth;
  Vec h = x;
  for (int k = 1; k <= depth; ++k) {
    const std::string pre = "mtp." + std::to_string(k - 1);
    std::vector<int> tok(rows), tg(rows);
    Vec emb(size_t(rows) * D);
    for (int r = 0; r < rows; ++r) {
      const bool inside = r % T + k < T;
      tok[r] = inside ? inputs[r + k] : 0;
      tg[r] = inside ? targets[r + k] : -1;
      for (int i = 0; i < D; ++i) emb[size_t(r) * D + i] = w["embedding"][size_t(tok[r]) * D + i];
    }
    Vec a = rmsnorm(h, w[pre + ".hidden_norm"], rows, D, c.norm_eps);
    Vec b = rmsnorm(emb, w[pre + ".embed_norm"], rows, D, c.norm_eps);
    Vec cat(size_t(rows) * 2 * D);
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < D; ++i) {
        cat[size_t(r) * 2 * D + i] = a[size_t(r) * D + i];
        cat[size_t(r) * 2 * D + D + i] = b[size_t(r) * D + i];
      }
    h = block(w, pre + ".block", c.n_layers > c.n_dense_layers, linear(cat, w[pre + ".proj"], rows, 2 * D, D), c, batch,
              bal, &aux);
    total += c.mtp.weight / depth * cross_entropy(h, pre + ".out_norm", tg) / (batch * (T - k));
  }
  return total + aux;
}

}  // namespace naive
