#include "model/moe.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mt {

MoE::MoE(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix, int max_in_flight)
    : env_(env), d_(cfg.d_model), seq_(cfg.seq_len), n_experts_(cfg.moe.n_routed_experts),
      n_local_(cfg.moe.n_routed_experts / env.shard.ep_size), top_k_(cfg.moe.top_k), hidden_(cfg.moe.expert_hidden), n_shared_(cfg.moe.n_shared_experts),
      shared_hidden_(cfg.moe.n_shared_experts * cfg.moe.expert_hidden), n_groups_(cfg.moe.n_groups),
      topk_groups_(cfg.moe.topk_groups), route_scale_(float(cfg.moe.route_scale)),
      gamma_(float(cfg.moe.bias_update_speed)), alpha_(float(cfg.moe.aux_alpha)),
      aux_kind_(cfg.moe.aux_loss), step_load_(cfg.moe.n_routed_experts, 0.0),
      step_prob_sum_(cfg.moe.n_routed_experts, 0.0), global_f_(cfg.moe.n_routed_experts, 0.0), saved_(max_in_flight) {
  using I = ParamStore::Init;
  ParamStore& p = *env.params;
  const int64_t E = n_experts_, H = hidden_, D = d_;
  router = p.add(prefix + ".router", {E, D}, I::normal, true);
  // Several shared experts are one SwiGLU with their hidden units side by side: the sum of
  // their outputs is exactly that wider FFN's output.
  shared_gate = shared_up = shared_down = -1;
  if (n_shared_ > 0) {
    shared_gate = p.add(prefix + ".shared.w_gate", {shared_hidden_, D}, I::normal, true);
    shared_up = p.add(prefix + ".shared.w_up", {shared_hidden_, D}, I::normal, true);
    shared_down = p.add(prefix + ".shared.w_down", {D, shared_hidden_}, I::normal, true);
  }
  const Split mine{0, env.shard.ep_size, env.shard.ep_rank};
  const Spread split = Spread::expert_split;
  expert_gate = p.add(prefix + ".experts.w_gate", {E, H, D}, I::normal, true, split, mine);
  expert_up = p.add(prefix + ".experts.w_up", {E, H, D}, I::normal, true, split, mine);
  expert_down = p.add(prefix + ".experts.w_down", {E, D, H}, I::normal, true, split, mine);
  bias_ = p.add_buffer(prefix + ".router_bias", size_t(E));
  for (auto& s : saved_) s.experts.resize(n_local_);
}

SwigluWeights MoE::expert_weights(int e) const {
  ParamStore& p = *env_.params;
  const size_t mat = size_t(hidden_) * d_;
  return {p.value(expert_gate) + e * mat, p.value(expert_up) + e * mat, p.value(expert_down) + e * mat, d_, hidden_};
}
SwigluGrads MoE::expert_grads(int e) const {
  ParamStore& p = *env_.params;
  const size_t mat = size_t(hidden_) * d_;
  return {p.grad(expert_gate) + e * mat, p.grad(expert_up) + e * mat, p.grad(expert_down) + e * mat};
}
SwigluWeights MoE::shared_weights() const {
  ParamStore& p = *env_.params;
  return {p.value(shared_gate), p.value(shared_up), p.value(shared_down), d_, shared_hidden_};
}

void MoE::plan_dispatch(const int* expert_begin, Dispatch& d) const {
  const int peers = env_.shard.ep_size, L = n_local_;
  std::vector<int> counts_out(n_experts_), counts_in(n_experts_);
  for (int e = 0; e < n_experts_; ++e) counts_out[e] = expert_begin[e + 1] - expert_begin[e];
  env_.shard.ep->all_to_all(counts_out, counts_in);  // counts_in[src * L + j]: rows from src for local expert j
  d.send_values.assign(peers, 0);
  d.recv_values.assign(peers, 0);
  d.local_begin.assign(L + 1, 0);
  for (int q = 0; q < peers; ++q)
    for (int j = 0; j < L; ++j) {
      d.send_values[q] += counts_out[q * L + j] * d_;
      d.recv_values[q] += counts_in[q * L + j] * d_;
      d.local_begin[j + 1] += counts_in[q * L + j];
    }
  for (int j = 0; j < L; ++j) d.local_begin[j + 1] += d.local_begin[j];
  d.rows_in = d.local_begin[L];
  d.local_of.resize(d.rows_in);
  std::vector<int> fill(d.local_begin.begin(), d.local_begin.end() - 1);
  int arriving = 0;
  for (int q = 0; q < peers; ++q)
    for (int j = 0; j < L; ++j)
      for (int i = 0; i < counts_in[q * L + j]; ++i) d.local_of[arriving++] = fill[j]++;
}

MoE::Arrival MoE::start_dispatch(Arena& arena, const Dispatch& d, const float* rows) const {
  const size_t n_out = size_t(std::accumulate(d.send_values.begin(), d.send_values.end(), 0));
  const size_t n_in = size_t(d.rows_in) * d_;
  Arrival a{arena.floats(n_in), nullptr};
  a.request = env_.shard.ep->iall_to_all_v({rows, n_out}, d.send_values, {a.rows, n_in}, d.recv_values);
  return a;
}

float* MoE::finish_dispatch(Arena& arena, const Dispatch& d, Arrival& a) const {
  a.request->wait();
  float* local = arena.floats(size_t(d.rows_in) * d_);
  for (int i = 0; i < d.rows_in; ++i)
    std::copy(a.rows + size_t(i) * d_, a.rows + size_t(i + 1) * d_, local + size_t(d.local_of[i]) * d_);
  return local;
}

void MoE::return_rows(Arena& arena, const Dispatch& d, const float* local, float* out) const {
  const size_t n_out = size_t(std::accumulate(d.send_values.begin(), d.send_values.end(), 0));
  const size_t n_in = size_t(d.rows_in) * d_;
  float* leaving = arena.floats(n_in);
  for (int i = 0; i < d.rows_in; ++i)
    std::copy(local + size_t(d.local_of[i]) * d_, local + size_t(d.local_of[i] + 1) * d_, leaving + size_t(i) * d_);
  env_.shard.ep->all_to_all_v({leaving, n_in}, d.recv_values, {out, n_out}, d.send_values);
}

void MoE::experts_forward(Saved& s, Arena& arena, const std::function<void()>& meanwhile) {
  if (env_.shard.ep_size == 1) {
    meanwhile();
    for (int e = 0; e < n_experts_; ++e) {
      const int begin = s.expert_begin[e], n = s.expert_begin[e + 1] - begin;
      swiglu_forward(env_, arena, expert_weights(e), s.xe + size_t(begin) * d_, n, s.ye + size_t(begin) * d_,
                     false, s.experts[e]);
    }
    return;
  }
  Dispatch& d = s.dispatch;
  plan_dispatch(s.expert_begin, d);
  Arrival arrival = start_dispatch(arena, d, s.xe);
  meanwhile();
  const float* x_local = finish_dispatch(arena, d, arrival);
  float* y_local = arena.floats(size_t(d.rows_in) * d_);
  for (int j = 0; j < n_local_; ++j) {
    const int begin = d.local_begin[j], n = d.local_begin[j + 1] - begin;
    swiglu_forward(env_, arena, expert_weights(j), x_local + size_t(begin) * d_, n, y_local + size_t(begin) * d_,
                   false, s.experts[j]);
  }
  return_rows(arena, d, y_local, s.ye);
}

void MoE::experts_backward_input(Saved& s, Arena& arena, const float* dye, float* dxe,
                                 const std::function<void()>& meanwhile) {
  if (env_.shard.ep_size == 1) {
    meanwhile();
    for (int e = 0; e < n_experts_; ++e) {
      const int begin = s.expert_begin[e];
      swiglu_backward_input(env_, arena, expert_weights(e), dye + size_t(begin) * d_, dxe + size_t(begin) * d_,
                            false, s.experts[e]);
    }
    return;
  }
  const Dispatch& d = s.dispatch;
  Arrival arrival = start_dispatch(arena, d, dye);
  meanwhile();
  const float* dy_local = finish_dispatch(arena, d, arrival);
  float* dx_local = arena.floats(size_t(d.rows_in) * d_);
  for (int j = 0; j < n_local_; ++j) {
    const int begin = d.local_begin[j];
    swiglu_backward_input(env_, arena, expert_weights(j), dy_local + size_t(begin) * d_, dx_local + size_t(begin) * d_,
                          false, s.experts[j]);
  }
  return_rows(arena, d, dx_local, dxe);
}

void MoE::select(const float* scores, int rows, int* chosen, float* gates) const {
  const float* bias = env_.params->buffer(bias_);
  const int per_group = n_experts_ / n_groups_;
  std::vector<float> biased(n_experts_), group_score(n_groups_);
  std::vector<int> order(n_experts_), group_order(n_groups_);
  for (int r = 0; r < rows; ++r) {
    const float* s = scores + size_t(r) * n_experts_;
    for (int i = 0; i < n_experts_; ++i) biased[i] = s[i] + bias[i];
    if (n_groups_ > 1) {
      for (int g = 0; g < n_groups_; ++g) {  // sum of the group's two best biased affinities
        float best = -INFINITY, second = -INFINITY;
        for (int i = g * per_group; i < (g + 1) * per_group; ++i) {
          if (biased[i] > best) { second = best; best = biased[i]; }
          else if (biased[i] > second) second = biased[i];
        }
        group_score[g] = best + (per_group > 1 ? second : 0.0f);
      }
      std::iota(group_order.begin(), group_order.end(), 0);
      std::stable_sort(group_order.begin(), group_order.end(),
                       [&](int a, int b) { return group_score[a] > group_score[b]; });
      for (int gi = topk_groups_; gi < n_groups_; ++gi)
        for (int i = 0; i < per_group; ++i) biased[group_order[gi] * per_group + i] = -INFINITY;
    }
    std::iota(order.begin(), order.end(), 0);
    // Ties go to the lower expert index, so selection never depends on sort internals.
    std::partial_sort(order.begin(), order.begin() + top_k_, order.end(),
                      [&](int a, int b) { return biased[a] > biased[b] || (biased[a] == biased[b] && a < b); });
    double sum = 0;
    for (int k = 0; k < top_k_; ++k) sum += s[order[k]];
    for (int k = 0; k < top_k_; ++k) {
      chosen[r * top_k_ + k] = order[k];
      gates[r * top_k_ + k] = float(route_scale_ * s[order[k]] / sum);
    }
  }
}

void MoE::reset_step_load() {
  std::fill(step_load_.begin(), step_load_.end(), 0.0);
  std::fill(step_prob_sum_.begin(), step_prob_sum_.end(), 0.0);
}

int MoE::group_size(int rows) const {
  if (aux_kind_ == "sequence") return seq_;
  if (aux_kind_ == "micro_batch" || aux_kind_ == "global_batch") return rows;
  return 0;
}

void MoE::group_load(const Saved& s, int begin, int size, std::vector<double>& f) const {
  f.assign(n_experts_, 0.0);
  for (int t = begin; t < begin + size; ++t)
    for (int k = 0; k < top_k_; ++k) f[s.chosen[t * top_k_ + k]] += double(n_experts_) / (top_k_ * size);
}

double MoE::finish_global_balance(long tokens) {
  global_tokens_ = tokens;
  double loss = 0;
  for (int i = 0; i < n_experts_; ++i) {
    global_f_[i] = step_load_[i] * n_experts_ / (double(top_k_) * tokens);
    loss += alpha_ * global_f_[i] * step_prob_sum_[i] / tokens;
  }
  return loss;
}

double MoE::forward(int slot, Arena& arena, const float* x, int batch, float* y, float aux_weight) {
  Saved& s = saved_[slot];
  ParamStore& p = *env_.params;
  const int rows = batch * seq_, E = n_experts_, K = top_k_;
  s.rows = rows;
  s.batch = batch;
  s.x = x;
  s.aux_weight = aux_weight;

  s.scores = arena.floats(size_t(rows) * E);
  env_.linear_forward(x, p.value(router), rows, d_, E, s.scores);
  for (size_t i = 0; i < size_t(rows) * E; ++i) s.scores[i] = 1.0f / (1.0f + std::exp(-s.scores[i]));
  s.chosen = arena.ints(size_t(rows) * K);
  s.gates = arena.floats(size_t(rows) * K);
  select(s.scores, rows, s.chosen, s.gates);

  // Group the (token, k) pairs by expert: a counting sort keeps tokens in order in each segment.
  s.expert_begin = arena.ints(E + 1);
  std::fill(s.expert_begin, s.expert_begin + E + 1, 0);
  for (int i = 0; i < rows * K; ++i) s.expert_begin[s.chosen[i] + 1]++;
  for (int e = 0; e < E; ++e) {
    step_load_[e] += s.expert_begin[e + 1];
    s.expert_begin[e + 1] += s.expert_begin[e];
  }
  s.perm_token = arena.ints(size_t(rows) * K);
  s.slot_row = arena.ints(size_t(rows) * K);
  int* fill = arena.ints(E);
  std::copy(s.expert_begin, s.expert_begin + E, fill);
  for (int i = 0; i < rows * K; ++i) {
    const int row = fill[s.chosen[i]]++;
    s.perm_token[row] = i / K;
    s.slot_row[i] = row;
  }
  s.xe = arena.floats(size_t(rows) * K * d_);
  s.ye = arena.floats(size_t(rows) * K * d_);
  for (int r = 0; r < rows * K; ++r)
    std::copy(x + size_t(s.perm_token[r]) * d_, x + size_t(s.perm_token[r] + 1) * d_, s.xe + size_t(r) * d_);
  // The shared experts compute while the routed rows travel to their experts.
  experts_forward(s, arena, [&] {
    if (n_shared_ > 0) swiglu_forward(env_, arena, shared_weights(), x, rows, y, false, s.shared);
    else std::fill(y, y + size_t(rows) * d_, 0.0f);
  });
  for (int t = 0; t < rows; ++t)
    for (int k = 0; k < K; ++k) {
      const float g = s.gates[t * K + k];
      const float* ye = s.ye + size_t(s.slot_row[t * K + k]) * d_;
      float* out = y + size_t(t) * d_;
      for (int i = 0; i < d_; ++i) out[i] += g * ye[i];
    }

  const int group = group_size(rows);
  if (group == 0) return 0.0;
  if (aux_kind_ == "global_batch") {
    for (int t = 0; t < rows; ++t) {
      const float* sc = s.scores + size_t(t) * E;
      const double total = std::accumulate(sc, sc + E, 0.0);
      for (int i = 0; i < E; ++i) step_prob_sum_[i] += sc[i] / total;
    }
    return 0.0;
  }
  double loss = 0;
  std::vector<double> f;
  for (int begin = 0; begin < rows; begin += group) {
    group_load(s, begin, group, f);
    for (int t = begin; t < begin + group; ++t) {
      const float* sc = s.scores + size_t(t) * E;
      const double total = std::accumulate(sc, sc + E, 0.0);
      for (int i = 0; i < E; ++i) loss += alpha_ * f[i] * sc[i] / total / group;
    }
  }
  return loss * aux_weight;
}

void MoE::backward_input(int slot, Arena& arena, const float* dy, float* dx) {
  Saved& s = saved_[slot];
  ParamStore& p = *env_.params;
  const int rows = s.rows, E = n_experts_, K = top_k_;

  // Through the gating product: d(expert output) = g dy, d(gate) = dy . expert output.
  float* dye = arena.floats(size_t(rows) * K * d_);
  float* dgate = arena.floats(size_t(rows) * K);
  for (int t = 0; t < rows; ++t)
    for (int k = 0; k < K; ++k) {
      const int r = s.slot_row[t * K + k];
      const float g = s.gates[t * K + k];
      const float* dyt = dy + size_t(t) * d_;
      const float* ye = s.ye + size_t(r) * d_;
      float* out = dye + size_t(r) * d_;
      double dot = 0;
      for (int i = 0; i < d_; ++i) { out[i] = g * dyt[i]; dot += double(dyt[i]) * ye[i]; }
      dgate[t * K + k] = float(dot);
    }
  float* dxe = arena.floats(size_t(rows) * K * d_);
  experts_backward_input(s, arena, dye, dxe, [&] {
    if (n_shared_ > 0) swiglu_backward_input(env_, arena, shared_weights(), dy, dx, false, s.shared);
    else std::fill(dx, dx + size_t(rows) * d_, 0.0f);
  });
  for (int r = 0; r < rows * K; ++r) {
    float* out = dx + size_t(s.perm_token[r]) * d_;
    const float* in = dxe + size_t(r) * d_;
    for (int i = 0; i < d_; ++i) out[i] += in[i];
  }

  // Gates g_k = c s_k / S over the selected experts: ds_k = c (dg_k - sum_j dg_j g_j / c) / S.
  float* dscore = arena.zeros(size_t(rows) * E);
  for (int t = 0; t < rows; ++t) {
    double S = 0, weighted = 0;
    for (int k = 0; k < K; ++k) {
      S += s.scores[size_t(t) * E + s.chosen[t * K + k]];
      weighted += double(dgate[t * K + k]) * s.gates[t * K + k];
    }
    for (int k = 0; k < K; ++k)
      dscore[size_t(t) * E + s.chosen[t * K + k]] += float((route_scale_ * dgate[t * K + k] - weighted) / S);
  }
  // Balance loss alpha sum_i f_i P_i, P_i = mean_t s_ti / sum_j s_tj; f is a count (no gradient).
  const int group = group_size(rows);
  if (group > 0) {
    const bool global = aux_kind_ == "global_batch";
    const double size = global ? double(global_tokens_) : double(group);
    std::vector<double> f;
    for (int begin = 0; begin < rows; begin += group) {
      if (global) f = global_f_;
      else group_load(s, begin, group, f);
      const double c = double(alpha_) * s.aux_weight / size;
      for (int t = begin; t < begin + group; ++t) {
        const float* sc = s.scores + size_t(t) * E;
        double total = 0, fs = 0;
        for (int i = 0; i < E; ++i) { total += sc[i]; fs += f[i] * sc[i]; }
        for (int i = 0; i < E; ++i) dscore[size_t(t) * E + i] += float(c * (f[i] / total - fs / (total * total)));
      }
    }
  }
  s.dlogits = arena.floats(size_t(rows) * E);
  for (size_t i = 0; i < size_t(rows) * E; ++i) s.dlogits[i] = dscore[i] * s.scores[i] * (1.0f - s.scores[i]);
  env_.linear_backward_input(s.dlogits, p.value(router), rows, d_, E, dx, true);
}

void MoE::backward_weight(int slot) {
  Saved& s = saved_[slot];
  ParamStore& p = *env_.params;
  env_.linear_backward_weight(s.dlogits, s.x, s.rows, d_, n_experts_, p.grad(router));
  for (int e = 0; e < n_local_; ++e) swiglu_backward_weight(env_, expert_weights(e), expert_grads(e), s.experts[e]);
  if (n_shared_ > 0)
    swiglu_backward_weight(env_, shared_weights(), {p.grad(shared_gate), p.grad(shared_up), p.grad(shared_down)},
                           s.shared);
}

void MoE::update_bias() {
  if (gamma_ == 0.0f) return;
  const double mean = std::accumulate(step_load_.begin(), step_load_.end(), 0.0) / n_experts_;
  float* b = bias();
  for (int e = 0; e < n_experts_; ++e) {
    if (step_load_[e] < mean) b[e] += gamma_;
    else if (step_load_[e] > mean) b[e] -= gamma_;
  }
}

}  // namespace mt
