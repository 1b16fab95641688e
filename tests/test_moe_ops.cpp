// The MoE and optimizer ops' CPU references against independent float64 computations (the
// naive model's routing, direct sums) and, for the router's backward pass, finite differences.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>

#include "naive_reference.hpp"
#include "ops/backend/cpu_ops.hpp"
#include "test_helpers.hpp"

using naive::Vec;

namespace {

mt::MoeConfig routing_config(int experts, int top_k, int groups, int topk_groups) {
  mt::MoeConfig m;
  m.n_routed_experts = experts;
  m.top_k = top_k;
  m.n_groups = groups;
  m.topk_groups = topk_groups;
  m.route_scale = 2.5;
  return m;
}

std::vector<float> sigmoid_scores(size_t n, uint64_t seed) {
  std::vector<float> s = testing::random_floats(n, seed, 2.0);
  for (float& x : s) x = 1.0f / (1.0f + std::exp(-x));
  return s;
}

struct Routed {
  std::vector<int> chosen;
  std::vector<float> gates;
};

Routed select(const std::vector<float>& scores, const std::vector<float>& bias, int tokens, const mt::MoeConfig& m) {
  Routed r{std::vector<int>(size_t(tokens) * m.top_k), std::vector<float>(size_t(tokens) * m.top_k)};
  mt::cpu::router_select(nullptr, {.tokens = tokens, .experts = m.n_routed_experts, .top_k = m.top_k,
                                   .n_groups = m.n_groups, .topk_groups = m.topk_groups,
                                   .route_scale = float(m.route_scale), .scores = scores.data(), .bias = bias.data(),
                                   .chosen = r.chosen.data(), .gates = r.gates.data()});
  return r;
}

}  // namespace

TEST_CASE("router_select chooses the naive model's experts and gates, group-limited or not") {
  const int tokens = 40;
  for (auto [experts, top_k, groups, topk_groups] : {std::array{8, 2, 1, 1}, {8, 2, 4, 2}, {16, 4, 8, 3}, {6, 1, 3, 1}}) {
    CAPTURE(experts);
    CAPTURE(groups);
    const mt::MoeConfig m = routing_config(experts, top_k, groups, topk_groups);
    const std::vector<float> scores = sigmoid_scores(size_t(tokens) * experts, 3);
    const std::vector<float> bias = testing::random_floats(size_t(experts), 4, 0.3);
    const Routed got = select(scores, bias, tokens, m);
    const naive::Routing want = naive::route(Vec(scores.begin(), scores.end()), Vec(bias.begin(), bias.end()), tokens, m);
    for (int t = 0; t < tokens; ++t)
      for (int k = 0; k < top_k; ++k) {
        CAPTURE(t);
        CHECK(got.chosen[size_t(t) * top_k + k] == want.chosen[t][k]);
        CHECK(got.gates[size_t(t) * top_k + k] == doctest::Approx(want.gates[t][k]).epsilon(1e-6));
      }
  }
}

TEST_CASE("router_select: the bias steers selection only, and ties go to the lower expert") {
  const mt::MoeConfig m = routing_config(4, 2, 1, 1);
  const std::vector<float> scores{0.5f, 0.5f, 0.5f, 0.5f};
  Routed r = select(scores, {0, 0, 0, 0}, 1, m);
  CHECK(r.chosen == std::vector<int>{0, 1});
  r = select(scores, {0, 0, 0.1f, 0.2f}, 1, m);
  CHECK(r.chosen == std::vector<int>{3, 2});
  CHECK(r.gates == std::vector<float>{1.25f, 1.25f});  // equal scores: route_scale split evenly
}

TEST_CASE("moe_permute groups pairs by expert, tokens in order, and counts the load") {
  const int tokens = 30, top_k = 3, experts = 7;
  std::vector<int> chosen(size_t(tokens) * top_k);
  for (size_t i = 0; i < chosen.size(); ++i) chosen[i] = int((i * 5 + i / 4) % experts);
  std::vector<int> begin(experts + 1), perm(chosen.size()), slot(chosen.size());
  std::vector<double> load(experts, 1.0);
  mt::cpu::moe_permute(nullptr, {.tokens = tokens, .top_k = top_k, .experts = experts, .chosen = chosen.data(),
                                 .expert_begin = begin.data(), .perm_token = perm.data(), .slot_row = slot.data(),
                                 .load = load.data()});
  CHECK(begin.front() == 0);
  CHECK(begin.back() == tokens * top_k);
  for (int e = 0; e < experts; ++e) {
    const long count = std::count(chosen.begin(), chosen.end(), e);
    CHECK(begin[e + 1] - begin[e] == count);
    CHECK(load[e] == 1.0 + double(count));
  }
  std::vector<int> seen(chosen.size(), 0);
  for (size_t i = 0; i < chosen.size(); ++i) {
    const int row = slot[i], e = chosen[i];
    CHECK(row >= begin[e]);
    CHECK(row < begin[e + 1]);
    CHECK(perm[row] == int(i) / top_k);
    seen[row]++;
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  for (int e = 0; e < experts; ++e)
    for (int r = begin[e] + 1; r < begin[e + 1]; ++r) CHECK(perm[r - 1] <= perm[r]);
}

TEST_CASE("gather_rows, moe_combine and moe_combine_backward against float64 sums") {
  const int tokens = 9, top_k = 2, dim = 5, pairs = tokens * top_k;
  std::vector<int> slot(pairs);
  std::iota(slot.begin(), slot.end(), 0);
  std::reverse(slot.begin(), slot.end());
  const std::vector<float> rows = testing::random_floats(size_t(pairs) * dim, 7), gates = testing::random_floats(pairs, 8);
  const std::vector<float> dy = testing::random_floats(size_t(tokens) * dim, 9), y0 = testing::random_floats(size_t(tokens) * dim, 10);

  std::vector<float> gathered(size_t(pairs) * dim);
  std::vector<int> index(pairs);
  for (int r = 0; r < pairs; ++r) index[r] = (r * 7) % pairs;
  mt::cpu::gather_rows(nullptr, {.rows = pairs, .cols = dim, .src = rows.data(), .index = index.data(), .dst = gathered.data()});
  for (int r = 0; r < pairs; ++r)
    for (int c = 0; c < dim; ++c) CHECK(gathered[size_t(r) * dim + c] == rows[size_t(index[r]) * dim + c]);

  for (bool gated : {true, false}) {
    std::vector<float> y = y0;
    mt::cpu::moe_combine(nullptr, {.tokens = tokens, .top_k = top_k, .dim = dim, .rows = rows.data(),
                                   .slot_row = slot.data(), .gates = gated ? gates.data() : nullptr, .y = y.data()});
    for (int t = 0; t < tokens; ++t)
      for (int c = 0; c < dim; ++c) {
        double want = y0[size_t(t) * dim + c];
        for (int k = 0; k < top_k; ++k)
          want += (gated ? double(gates[t * top_k + k]) : 1.0) * rows[size_t(slot[t * top_k + k]) * dim + c];
        CHECK(y[size_t(t) * dim + c] == doctest::Approx(want).epsilon(1e-6));
      }
  }
  std::vector<float> drows(size_t(pairs) * dim), dgate(pairs);
  mt::cpu::moe_combine_backward(nullptr, {.tokens = tokens, .top_k = top_k, .dim = dim, .dy = dy.data(),
                                          .rows = rows.data(), .slot_row = slot.data(), .gates = gates.data(),
                                          .drows = drows.data(), .dgate = dgate.data()});
  for (int t = 0; t < tokens; ++t)
    for (int k = 0; k < top_k; ++k) {
      const int p = t * top_k + k, r = slot[p];
      double dot = 0;
      for (int c = 0; c < dim; ++c) {
        dot += double(dy[size_t(t) * dim + c]) * rows[size_t(r) * dim + c];
        CHECK(drows[size_t(r) * dim + c] == doctest::Approx(double(gates[p]) * dy[size_t(t) * dim + c]).epsilon(1e-6));
      }
      CHECK(dgate[p] == doctest::Approx(dot).epsilon(1e-6));
    }
}

TEST_CASE("router_backward matches finite differences of the gates and the balance loss") {
  const int tokens = 6, experts = 6, top_k = 2, group = 3;
  const mt::MoeConfig m = routing_config(experts, top_k, 1, 1);
  const std::vector<float> logits = testing::random_floats(size_t(tokens) * experts, 12, 1.5);
  std::vector<float> scores(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) scores[i] = 1.0f / (1.0f + std::exp(-logits[i]));
  const Routed r = select(scores, std::vector<float>(experts, 0.0f), tokens, m);
  const std::vector<float> dgate = testing::random_floats(r.gates.size(), 13);
  std::vector<double> f(size_t(tokens / group) * experts);
  for (size_t i = 0; i < f.size(); ++i) f[i] = 0.3 + 0.1 * double(i % 5);
  const double coef = 0.7;
  // The selection stays fixed under small changes of the logits; f carries no gradient.
  auto objective = [&](const Vec& z) {
    double total_obj = 0;
    for (int t = 0; t < tokens; ++t) {
      Vec s(experts);
      for (int i = 0; i < experts; ++i) s[i] = naive::sigmoid(z[size_t(t) * experts + i]);
      double S = 0;
      for (int k = 0; k < top_k; ++k) S += s[r.chosen[t * top_k + k]];
      for (int k = 0; k < top_k; ++k) total_obj += dgate[t * top_k + k] * m.route_scale * s[r.chosen[t * top_k + k]] / S;
      const double T = std::accumulate(s.begin(), s.end(), 0.0);
      for (int i = 0; i < experts; ++i) total_obj += coef * f[size_t(t / group) * experts + i] * s[i] / T;
    }
    return total_obj;
  };
  std::vector<float> dlogits(logits.size());
  mt::cpu::router_backward(nullptr, {.tokens = tokens, .experts = experts, .top_k = top_k,
                                     .route_scale = float(m.route_scale), .scores = scores.data(),
                                     .chosen = r.chosen.data(), .gates = r.gates.data(), .dgate = dgate.data(),
                                     .f = f.data(), .group = group, .f_stride = experts, .coef = coef,
                                     .dlogits = dlogits.data()});
  const Vec z(logits.begin(), logits.end());
  Vec fd(z.size());
  for (size_t i = 0; i < z.size(); ++i) {
    Vec up = z, down = z;
    up[i] += 1e-6;
    down[i] -= 1e-6;
    fd[i] = (objective(up) - objective(down)) / 2e-6;
  }
  for (size_t i = 0; i < fd.size(); ++i) {
    CAPTURE(i);
    CHECK(dlogits[i] == doctest::Approx(fd[i]).epsilon(1e-4).scale(1e-5));
  }
}

TEST_CASE("balance statistics: per-group loss, global-batch sums and f, against float64 formulas") {
  const int tokens = 8, experts = 4, top_k = 2, group = 4;
  const std::vector<float> scores = sigmoid_scores(size_t(tokens) * experts, 21);
  const Routed r = select(scores, std::vector<float>(experts, 0.0f), tokens, routing_config(experts, top_k, 1, 1));
  std::vector<double> f(size_t(tokens / group) * experts);
  double loss = 1.0;  // the op adds weight * the loss
  mt::cpu::balance_loss(nullptr, {.tokens = tokens, .experts = experts, .top_k = top_k, .group = group, .alpha = 0.5f,
                                  .scores = scores.data(), .chosen = r.chosen.data(), .f = f.data(), .weight = 2.0,
                                  .sum = &loss});
  double want = 0;
  std::vector<double> prob_sum(experts, 0.0);
  for (int g = 0; g < tokens / group; ++g)
    for (int i = 0; i < experts; ++i) {
      double count = 0, P = 0;
      for (int t = g * group; t < (g + 1) * group; ++t) {
        count += std::count(r.chosen.begin() + t * top_k, r.chosen.begin() + (t + 1) * top_k, i);
        double T = 0;
        for (int j = 0; j < experts; ++j) T += scores[size_t(t) * experts + j];
        P += scores[size_t(t) * experts + i] / T;
        prob_sum[i] += scores[size_t(t) * experts + i] / T;
      }
      const double fi = double(experts) / (top_k * group) * count;
      CHECK(f[size_t(g) * experts + i] == doctest::Approx(fi).epsilon(1e-12));
      want += 0.5 * fi * P / group;
    }
  CHECK(loss == doctest::Approx(1.0 + 2.0 * want).epsilon(1e-6));

  std::vector<double> sums(experts, 2.0);
  mt::cpu::balance_prob_sums(nullptr, {.tokens = tokens, .experts = experts, .scores = scores.data(), .prob_sum = sums.data()});
  for (int i = 0; i < experts; ++i) CHECK(sums[i] == doctest::Approx(2.0 + prob_sum[i]).epsilon(1e-12));

  const std::vector<double> load{3, 5, 0, 8};
  std::vector<double> gf(experts);
  double global = 0.0;
  mt::cpu::global_balance(nullptr, {.experts = experts, .top_k = top_k, .tokens = 8, .alpha = 0.5f, .load = load.data(),
                                    .prob_sum = prob_sum.data(), .f = gf.data(), .sum = &global});
  double want_global = 0;
  for (int i = 0; i < experts; ++i) {
    CHECK(gf[i] == doctest::Approx(load[i] * experts / (top_k * 8.0)).epsilon(1e-12));
    want_global += 0.5 * gf[i] * prob_sum[i] / 8.0;
  }
  CHECK(global == doctest::Approx(want_global).epsilon(1e-12));
}

TEST_CASE("bias_update moves each bias by gamma toward the mean load") {
  const std::vector<double> load{1, 4, 2, 2};  // mean 2.25
  std::vector<float> bias{0.5f, 0.5f, 0.5f, 0.5f};
  mt::cpu::bias_update(nullptr, {.experts = 4, .gamma = 0.25f, .load = load.data(), .bias = bias.data()});
  CHECK(bias == std::vector<float>{0.75f, 0.25f, 0.75f, 0.75f});
  const std::vector<double> even{2, 2, 2, 2};
  mt::cpu::bias_update(nullptr, {.experts = 4, .gamma = 0.25f, .load = even.data(), .bias = bias.data()});
  CHECK(bias == std::vector<float>{0.75f, 0.25f, 0.75f, 0.75f});
}

TEST_CASE("grouped_gemm: each group's rows times its own matrix, empty groups included") {
  const int groups = 4, n = 5, k = 3;
  const std::vector<int> offsets{0, 4, 4, 9, 11};  // group 1 is empty
  const int rows = offsets.back();
  const std::vector<float> a = testing::random_floats(size_t(rows) * k, 31), w = testing::random_floats(size_t(groups) * n * k, 32);
  const std::vector<float> c0 = testing::random_floats(size_t(rows) * n, 33);
  for (bool trans_b : {true, false})
    for (float beta : {0.0f, 1.0f}) {
      std::vector<float> c = c0;
      mt::cpu::grouped_gemm(nullptr, {.groups = groups, .offsets = offsets.data(), .ragged = mt::Ragged::rows, .n = n,
                                      .k = k, .a = a.data(), .b = w.data(), .trans_b = trans_b, .c = c.data(),
                                      .beta = beta});
      for (int g = 0; g < groups; ++g)
        for (int r = offsets[g]; r < offsets[g + 1]; ++r)
          for (int j = 0; j < n; ++j) {
            double want = beta * c0[size_t(r) * n + j];
            for (int i = 0; i < k; ++i)
              want += double(a[size_t(r) * k + i]) *
                      w[size_t(g) * n * k + (trans_b ? size_t(j) * k + i : size_t(i) * n + j)];
            CHECK(c[size_t(r) * n + j] == doctest::Approx(want).epsilon(1e-5));
          }
    }
  // Weight gradients: C_g[m, n] += A_g^T B_g over each group's rows.
  const int m = 3;
  const std::vector<float> dy = testing::random_floats(size_t(rows) * m, 34), x = testing::random_floats(size_t(rows) * n, 35);
  const std::vector<float> dw0 = testing::random_floats(size_t(groups) * m * n, 36);
  std::vector<float> dw = dw0;
  mt::cpu::grouped_gemm(nullptr, {.groups = groups, .offsets = offsets.data(), .ragged = mt::Ragged::reduce, .m = m,
                                  .n = n, .a = dy.data(), .b = x.data(), .c = dw.data(), .beta = 1.0f});
  for (int g = 0; g < groups; ++g)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double want = dw0[(size_t(g) * m + i) * n + j];
        for (int r = offsets[g]; r < offsets[g + 1]; ++r) want += double(dy[size_t(r) * m + i]) * x[size_t(r) * n + j];
        CHECK(dw[(size_t(g) * m + i) * n + j] == doctest::Approx(want).epsilon(1e-5));
      }
}

TEST_CASE("optimizer ops: sum of squares, scaling and AdamW against float64") {
  const std::vector<float> g = testing::random_floats(1000, 41);
  double ss = 0;
  for (float v : g) ss += double(v) * v;
  const float* runs[] = {g.data(), g.data() + 400};
  const size_t lengths[] = {400, g.size() - 400};
  double sum = 0.5;  // the op adds to it
  mt::cpu::sum_squares(nullptr, {.runs = 2, .x = runs, .n = lengths, .sum = &sum});
  CHECK(sum == doctest::Approx(0.5 + ss).epsilon(1e-12));
  std::vector<float> scaled = g;
  mt::cpu::scale(nullptr, {.n = scaled.size(), .factor = 0.5f, .x = scaled.data()});
  for (size_t i = 0; i < g.size(); ++i) CHECK(scaled[i] == g[i] * 0.5f);

  std::vector<float> value = testing::random_floats(1000, 42), m = testing::random_floats(1000, 43, 0.1);
  std::vector<float> v = testing::random_floats(1000, 44, 0.1);
  for (float& x : v) x = std::abs(x);
  const std::vector<float> value0 = value, m0 = m, v0 = v;
  const double lr = 1e-2, bc1 = 0.19, bc2 = 0.0975, eps = 1e-8;
  const float b1 = 0.9f, b2 = 0.95f, decay = 1e-3f;
  const mt::AdamwStepValues step{.lr = lr, .bias_correction1 = bc1, .bias_correction2 = bc2, .decay = decay};
  mt::cpu::adamw(nullptr, {.n = 1000, .step = &step, .decay = true, .eps = eps, .beta1 = b1, .beta2 = b2,
                           .grad = g.data(), .value = value.data(), .m = m.data(), .v = v.data()});
  for (size_t i = 0; i < 1000; ++i) {
    const double mi = b1 * double(m0[i]) + (1 - double(b1)) * g[i], vi = b2 * double(v0[i]) + (1 - double(b2)) * g[i] * g[i];
    const double want = value0[i] - lr * (mi / bc1) / (std::sqrt(vi / bc2) + eps) - decay * double(value0[i]);
    CAPTURE(i);
    CHECK(m[i] == doctest::Approx(mi).epsilon(1e-5));
    CHECK(v[i] == doctest::Approx(vi).epsilon(1e-5));
    CHECK(value[i] == doctest::Approx(want).epsilon(1e-5));
  }
}

TEST_CASE("shift_tokens: position r takes token r + shift of its own sequence, else none") {
  const std::vector<int> tokens{1, 2, 3, 4, 5, 6}, targets{2, 3, 4, 5, 6, 7};
  std::vector<int> out(6), out_targets(6);
  mt::cpu::shift_tokens(nullptr, {.rows = 6, .seq = 3, .shift = 1, .tokens = tokens.data(), .targets = targets.data(),
                                  .tokens_out = out.data(), .targets_out = out_targets.data()});
  CHECK(out == std::vector<int>{2, 3, 0, 5, 6, 0});
  CHECK(out_targets == std::vector<int>{3, 4, -1, 6, 7, -1});
}
