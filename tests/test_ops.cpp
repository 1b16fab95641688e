// Every CPU reference op: forward against the float64 reference, backward against float64
// central finite differences of it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "naive_reference.hpp"
#include "ops/bf16.hpp"
#include "ops/backend/cpu_ops.hpp"
#include "ops/attention/online_softmax.hpp"
#include "tensor/arena.hpp"
#include "test_helpers.hpp"

using naive::Vec;

namespace {

// d/dx_i of f at x, central differences in float64.
Vec finite_diff(const std::function<double(const Vec&)>& f, Vec x, double h = 1e-6) {
  Vec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = f(x);
    x[i] = keep - h;
    const double down = f(x);
    x[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

void check_close(const float* got, const Vec& want, double rel) {
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  REQUIRE(scale > 0);
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(got[i] - want[i]) <= rel * scale);
  }
}

Vec to_vec(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }
double dot(const Vec& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

TEST_CASE("gemm: every transpose combination, alpha and beta, fp32 and bf16 inputs") {
  const int m = 7, n = 5, k = 9;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (auto inputs : {mt::GemmPrecision::fp32, mt::GemmPrecision::bf16}) {
        CAPTURE(ta);
        CAPTURE(tb);
        auto a = testing::random_floats(size_t(m) * k, 1), b = testing::random_floats(size_t(k) * n, 2);
        auto c = testing::random_floats(size_t(m) * n, 3);
        Vec want(size_t(m) * n);
        auto rd = [&](float v) { return inputs == mt::GemmPrecision::bf16 ? double(mt::round_to_bf16(v)) : double(v); };
        for (int i = 0; i < m; ++i)
          for (int j = 0; j < n; ++j) {
            double s = 0;
            for (int p = 0; p < k; ++p)
              s += rd(ta ? a[size_t(p) * m + i] : a[size_t(i) * k + p]) * rd(tb ? b[size_t(j) * k + p] : b[size_t(p) * n + j]);
            want[size_t(i) * n + j] = 0.5 * s - 2.0 * c[size_t(i) * n + j];
          }
        mt::cpu::gemm(nullptr, {.m = m, .n = n, .k = k, .a = a.data(), .trans_a = ta, .b = b.data(), .trans_b = tb,
                                .c = c.data(), .alpha = 0.5f, .beta = -2.0f, .inputs = inputs});
        check_close(c.data(), want, 1e-6);
      }
}

TEST_CASE("bf16 rounding is round-to-nearest-even on the upper 16 bits") {
  CHECK(mt::round_to_bf16(1.0f) == 1.0f);
  CHECK(mt::round_to_bf16(1.0f + 1.0f / 256) == 1.0f);               // halfway: ties to even (down)
  CHECK(mt::round_to_bf16(1.0f + 3.0f / 256) == 1.0f + 4.0f / 256);  // halfway: ties to even (up)
  CHECK(mt::round_to_bf16(1.0f + 1.5f / 256) == 1.0f + 2.0f / 256);
  CHECK(std::isnan(mt::round_to_bf16(NAN)));
}

TEST_CASE("rmsnorm forward, backward_input and backward_weight") {
  const int rows = 3, dim = 6;
  const double eps = 1e-5;
  auto x = testing::random_floats(size_t(rows) * dim, 4), w = testing::random_floats(dim, 5);
  auto r = testing::random_floats(size_t(rows) * dim, 6);
  std::vector<float> y(x.size()), rstd(rows), dx(x.size()), dw(dim, 0.5f);
  mt::cpu::rmsnorm_forward(nullptr, {.rows = rows, .dim = dim, .eps = float(eps), .x = x.data(), .weight = w.data(), .y = y.data(), .rstd = rstd.data()});
  check_close(y.data(), naive::rmsnorm(to_vec(x), to_vec(w), rows, dim, eps), 1e-6);
  mt::cpu::rmsnorm_backward_input(nullptr, {.rows = rows, .dim = dim, .dy = r.data(), .x = x.data(), .weight = w.data(), .rstd = rstd.data(), .dx = dx.data()});
  mt::cpu::rmsnorm_backward_weight(nullptr, {.rows = rows, .dim = dim, .dy = r.data(), .x = x.data(), .rstd = rstd.data(), .dweight = dw.data()});
  check_close(dx.data(), finite_diff([&](const Vec& xx) { return dot(naive::rmsnorm(xx, to_vec(w), rows, dim, eps), r); }, to_vec(x)), 1e-5);
  Vec want_dw = finite_diff([&](const Vec& ww) { return dot(naive::rmsnorm(to_vec(x), ww, rows, dim, eps), r); }, to_vec(w));
  for (double& v : want_dw) v += 0.5;  // backward_weight accumulates
  check_close(dw.data(), want_dw, 1e-5);
}

// The fused residual add must be the unfused add followed by the norm, bit for bit: the block's
// step is claimed unchanged by the fusion.
TEST_CASE("rmsnorm with a fused residual equals add then rmsnorm, bitwise, in place") {
  const int rows = 4, dim = 10;
  const size_t n = size_t(rows) * dim;
  auto x = testing::random_floats(n, 40), res = testing::random_floats(n, 41), w = testing::random_floats(dim, 42);
  auto dy = testing::random_floats(n, 43), around = testing::random_floats(n, 44);
  std::vector<float> sum = x, y(n), rstd(rows), fused_y(n), fused_rstd(rows);
  for (size_t i = 0; i < n; ++i) sum[i] += res[i];
  mt::cpu::rmsnorm_forward(nullptr, {.rows = rows, .dim = dim, .x = sum.data(), .weight = w.data(), .y = y.data(),
                                     .rstd = rstd.data()});
  std::vector<float> inout = x;  // x + residual lands where x was
  mt::cpu::rmsnorm_forward(nullptr, {.rows = rows, .dim = dim, .x = inout.data(), .weight = w.data(), .y = fused_y.data(),
                                     .rstd = fused_rstd.data(), .residual = res.data(), .sum = inout.data()});
  CHECK(inout == sum);
  CHECK(fused_y == y);
  CHECK(fused_rstd == rstd);

  std::vector<float> dx(n), fused_dx(n);
  mt::cpu::rmsnorm_backward_input(nullptr, {.rows = rows, .dim = dim, .dy = dy.data(), .x = sum.data(), .weight = w.data(),
                                            .rstd = rstd.data(), .dx = dx.data()});
  for (size_t i = 0; i < n; ++i) dx[i] += around[i];
  mt::cpu::rmsnorm_backward_input(nullptr, {.rows = rows, .dim = dim, .dy = dy.data(), .x = sum.data(), .weight = w.data(),
                                            .rstd = rstd.data(), .dx = fused_dx.data(), .residual_grad = around.data()});
  CHECK(fused_dx == dx);
}

TEST_CASE("rope matches the reference rotation and its inverse undoes it") {
  const int rows = 6, heads = 2, hd = 4, seq = 3;
  auto x = testing::random_floats(size_t(rows) * heads * hd, 7);
  auto y = x;
  mt::cpu::rope(nullptr, {.rows = rows, .heads = heads, .head_dim = hd, .rot_offset = 0, .rot_dim = hd, .seq_len = seq, .theta = 100.0f, .x = y.data()});
  Vec want = to_vec(x);
  naive::rope(want, rows, heads, hd, seq, 100.0);
  check_close(y.data(), want, 1e-6);
  mt::cpu::rope(nullptr, {.rows = rows, .heads = heads, .head_dim = hd, .rot_offset = 0, .rot_dim = hd, .seq_len = seq, .theta = 100.0f, .inverse = true, .x = y.data()});
  check_close(y.data(), to_vec(x), 1e-6);
}

// The rotation into a bfloat16 copy is the in-place rotation, rounded, with the features outside
// the rotated range (MLA's nope part) rounded as they are; the input is left alone.
TEST_CASE("rope into a bfloat16 copy: the in-place rotation rounded, input untouched") {
  const int rows = 5, heads = 3, hd = 10, seq = 4;
  for (int offset : {0, 4}) {
    CAPTURE(offset);
    const mt::RopeArgs base{.rows = rows, .heads = heads, .head_dim = hd, .rot_offset = offset, .rot_dim = hd - offset,
                            .seq_len = seq, .theta = 50.0f};
    auto x = testing::random_floats(size_t(rows) * heads * hd, 70 + offset);
    const auto before = x;
    auto rotated = x;
    mt::RopeArgs in_place = base;
    in_place.x = rotated.data();
    mt::cpu::rope(nullptr, in_place);
    std::vector<mt::Bf16> out(x.size());
    mt::RopeArgs to_bf16 = base;
    to_bf16.x = x.data();
    to_bf16.out_bf16 = out.data();
    mt::cpu::rope(nullptr, to_bf16);
    CHECK(x == before);
    for (size_t i = 0; i < x.size(); ++i) REQUIRE(out[i].bits == mt::float_to_bf16_bits(rotated[i]));
  }
}

// YaRN with DeepSeek-V3's numbers (64 rotated features, base 10000, 4096 original positions,
// beta 32 and 1, factor 40): pairs that turn more than 32 times over 4096 positions (index below
// floor(10.5) = 10) keep their frequency, those turning less than once (above ceil(22.5) = 23) are
// divided by 40, and the ramp between falls monotonically.
TEST_CASE("rope_frequency: YaRN keeps the fast pairs, interpolates the slow ones, ramps between") {
  const mt::RopeScaling y{.factor = 40, .original_seq_len = 4096, .beta_fast = 32, .beta_slow = 1};
  auto plain = [](int pair) { return mt::rope_frequency(pair, 64, 10000.0f, {}); };
  for (int pair = 0; pair <= 10; ++pair) CHECK(mt::rope_frequency(pair, 64, 10000.0f, y) == plain(pair));
  for (int pair = 23; pair < 32; ++pair)
    CHECK(mt::rope_frequency(pair, 64, 10000.0f, y) == doctest::Approx(plain(pair) / 40).epsilon(1e-12));
  double last = 1;
  for (int pair = 11; pair < 23; ++pair) {
    const double kept = mt::rope_frequency(pair, 64, 10000.0f, y) / plain(pair);
    CHECK(kept < last);
    CHECK(kept > 1.0 / 40);
    last = kept;
  }
  // The magnitude scales cos and sin, forward and inverse alike.
  float c = 0, s = 0, c1 = 0, s1 = 0;
  mt::rope_cos_sin(7, 3, 64, 10000.0f, {}, false, &c, &s);
  mt::rope_cos_sin(7, 3, 64, 10000.0f, {.magnitude = 2}, true, &c1, &s1);
  CHECK(c1 == doctest::Approx(2 * c));
  CHECK(s1 == doctest::Approx(-2 * s));
}

TEST_CASE("causal attention forward (out and lse) and backward, equal and different qk/v dims") {
  struct Shape { int batch, seq, heads, qk, vd; };
  for (const Shape sh : {Shape{2, 4, 2, 3, 3}, Shape{1, 6, 3, 5, 2}}) {
    CAPTURE(sh.qk);
    CAPTURE(sh.vd);
    const int batch = sh.batch, seq = sh.seq, heads = sh.heads, qk = sh.qk, vd = sh.vd;
    const size_t nq = size_t(batch) * seq * heads * qk, nv = size_t(batch) * seq * heads * vd;
    const uint64_t key = 8 + 4 * uint64_t(qk);
    auto q = testing::random_floats(nq, key), k = testing::random_floats(nq, key + 1);
    auto v = testing::random_floats(nv, key + 2), r = testing::random_floats(nv, key + 3);
    std::vector<float> out(nv), lse(size_t(batch) * heads * seq), dq(nq), dk(nq), dv(nv);
    const float scale = 1.0f / std::sqrt(float(qk));
    mt::cpu::attention_forward(nullptr, {.batch = batch, .seq = seq, .heads = heads, .qk_dim = qk, .v_dim = vd,
                                         .scale = scale, .q = q.data(), .k = k.data(), .v = v.data(),
                                         .out = out.data(), .lse = lse.data()});
    auto f_out = [&](const Vec& qq, const Vec& kk, const Vec& vv) {
      return naive::causal_attention(qq, kk, vv, batch, seq, heads, qk, vd, scale);
    };
    check_close(out.data(), f_out(to_vec(q), to_vec(k), to_vec(v)), 1e-6);
    check_close(lse.data(), naive::causal_attention_lse(to_vec(q), to_vec(k), batch, seq, heads, qk, scale), 1e-6);
    mt::cpu::attention_backward(nullptr, {.batch = batch, .seq = seq, .heads = heads, .qk_dim = qk, .v_dim = vd,
                                          .scale = scale, .q = q.data(), .k = k.data(), .v = v.data(),
                                          .out = out.data(), .lse = lse.data(), .dout = r.data(), .dq = dq.data(),
                                          .dk = dk.data(), .dv = dv.data()});
    auto f = [&](const Vec& qq, const Vec& kk, const Vec& vv) { return dot(f_out(qq, kk, vv), r); };
    check_close(dq.data(), finite_diff([&](const Vec& x) { return f(x, to_vec(k), to_vec(v)); }, to_vec(q)), 1e-5);
    check_close(dk.data(), finite_diff([&](const Vec& x) { return f(to_vec(q), x, to_vec(v)); }, to_vec(k)), 1e-5);
    check_close(dv.data(), finite_diff([&](const Vec& x) { return f(to_vec(q), to_vec(k), x); }, to_vec(v)), 1e-5);
  }
}

TEST_CASE("attention with bf16 inputs rounds q, k, v and dout where they enter the products") {
  const int batch = 2, seq = 9, heads = 2, qk = 6, vd = 4;
  const size_t nq = size_t(batch) * seq * heads * qk, nv = size_t(batch) * seq * heads * vd;
  const size_t nl = size_t(batch) * heads * seq;
  const auto q = testing::random_floats(nq, 90), k = testing::random_floats(nq, 91);
  const auto v = testing::random_floats(nv, 92), dout = testing::random_floats(nv, 93);
  auto rounded = [](std::vector<float> x) {
    for (float& e : x) e = mt::round_to_bf16(e);
    return x;
  };
  struct Result { std::vector<float> out, lse, dq, dk, dv; };
  auto run = [&](const std::vector<float>& qq, const std::vector<float>& kk, const std::vector<float>& vv,
                 const std::vector<float>& dd, mt::GemmPrecision inputs) {
    Result r{std::vector<float>(nv), std::vector<float>(nl), std::vector<float>(nq), std::vector<float>(nq),
             std::vector<float>(nv)};
    mt::cpu::attention_forward(nullptr, {.batch = batch, .seq = seq, .heads = heads, .qk_dim = qk, .v_dim = vd,
                                         .scale = 0.4f, .q = qq.data(), .k = kk.data(), .v = vv.data(),
                                         .out = r.out.data(), .lse = r.lse.data(), .inputs = inputs});
    mt::cpu::attention_backward(nullptr, {.batch = batch, .seq = seq, .heads = heads, .qk_dim = qk, .v_dim = vd,
                                          .scale = 0.4f, .q = qq.data(), .k = kk.data(), .v = vv.data(),
                                          .out = r.out.data(), .lse = r.lse.data(), .dout = dd.data(),
                                          .dq = r.dq.data(), .dk = r.dk.data(), .dv = r.dv.data(), .inputs = inputs});
    return r;
  };
  const Result bf = run(q, k, v, dout, mt::GemmPrecision::bf16);
  // Rounded beforehand, the inputs meet the same products: the same bits (D uses the dout given).
  const Result pre = run(rounded(q), rounded(k), rounded(v), dout, mt::GemmPrecision::bf16);
  CHECK(bf.out == pre.out);
  CHECK(bf.lse == pre.lse);
  CHECK(bf.dq == pre.dq);
  CHECK(bf.dk == pre.dk);
  CHECK(bf.dv == pre.dv);
  // FP8 training runs attention in BF16.
  const Result f8 = run(q, k, v, dout, mt::GemmPrecision::fp8);
  CHECK(f8.out == bf.out);
  CHECK(f8.dq == bf.dq);
  // Against fp32: apart by bfloat16's rounding (8 bits), not more.
  const Result fp = run(q, k, v, dout, mt::GemmPrecision::fp32);
  for (auto [got, want] : {std::pair{&bf.out, &fp.out}, {&bf.dq, &fp.dq}, {&bf.dk, &fp.dk}, {&bf.dv, &fp.dv}}) {
    double diff = 0, scale = 0;
    for (size_t i = 0; i < want->size(); ++i) {
      diff = std::max(diff, std::fabs(double((*got)[i]) - (*want)[i]));
      scale = std::max(scale, std::fabs(double((*want)[i])));
    }
    CHECK(diff / scale > 1e-4);
    CHECK(diff / scale < 2e-2);
  }
}

// The recurrence of src/ops/attention/online_softmax.hpp, run over a row's scores in tiles as the CUDA
// kernels run it, against a plain float64 softmax of the whole row.
TEST_CASE("online softmax over tiles gives the plain softmax's average, log-sum-exp and probabilities") {
  const int n = 100;
  auto values = testing::random_floats(n, 40);
  for (int tile : {1, 7, 32, 100}) {
    for (int pattern = 0; pattern < 4; ++pattern) {
      CAPTURE(tile);
      CAPTURE(pattern);
      // 0: random; 1: increasing (every tile raises the maximum); 2: large magnitudes;
      // 3: the first 40 scores masked, so whole tiles are masked before any score is seen.
      std::vector<float> s = testing::random_floats(n, 41 + pattern, pattern == 2 ? 30.0 : 3.0);
      if (pattern == 1) std::sort(s.begin(), s.end());
      if (pattern == 3) std::fill(s.begin(), s.begin() + 40, -INFINITY);

      mt::OnlineSoftmax row;
      float acc = 0;
      for (int t0 = 0; t0 < n; t0 += tile) {
        const int t1 = std::min(n, t0 + tile);
        float tile_max = -INFINITY, tile_sum = 0, tile_acc = 0;
        for (int i = t0; i < t1; ++i) tile_max = std::max(tile_max, s[i]);
        acc *= row.rescale(tile_max);
        for (int i = t0; i < t1; ++i) {
          const float p = row.weight(s[i]);
          tile_sum += p;
          tile_acc += p * values[i];
        }
        row.add(tile_sum);
        acc += tile_acc;
      }

      double mx = -INFINITY, z = 0, avg = 0;
      for (float x : s) mx = std::max(mx, double(x));
      for (int i = 0; i < n; ++i) z += std::exp(double(s[i]) - mx);
      for (int i = 0; i < n; ++i) avg += std::exp(double(s[i]) - mx) / z * values[i];
      const double lse = mx + std::log(z);
      CHECK(std::abs(row.lse() - lse) <= 1e-6 * std::max(1.0, std::abs(lse)));
      CHECK(std::abs(row.normalise(acc) - avg) <= 1e-6);
      double total = 0;
      for (int i = 0; i < n; ++i) {
        const double want = std::exp(double(s[i]) - lse);
        CHECK(std::abs(mt::softmax_prob(s[i], row.lse()) - want) <= 1e-6);
        total += mt::softmax_prob(s[i], row.lse());
      }
      CHECK(std::abs(total - 1.0) <= 1e-5);
    }
  }
}

TEST_CASE("swiglu forward and backward") {
  const size_t n = 10;
  auto g = testing::random_floats(n, 12, 2.0), u = testing::random_floats(n, 13), r = testing::random_floats(n, 14);
  std::vector<float> h(n), dg(n), du(n);
  mt::cpu::swiglu_forward(nullptr, {.n = n, .gate = g.data(), .up = u.data(), .h = h.data()});
  auto f = [&](const Vec& gg, const Vec& uu) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += gg[i] * naive::sigmoid(gg[i]) * uu[i] * r[i];
    return s;
  };
  for (size_t i = 0; i < n; ++i) CHECK(h[i] == doctest::Approx(g[i] * naive::sigmoid(g[i]) * u[i]).epsilon(1e-6));
  mt::cpu::swiglu_backward(nullptr, {.n = n, .gate = g.data(), .up = u.data(), .dh = r.data(), .dgate = dg.data(), .dup = du.data()});
  check_close(dg.data(), finite_diff([&](const Vec& x) { return f(x, to_vec(u)); }, to_vec(g)), 1e-5);
  check_close(du.data(), finite_diff([&](const Vec& x) { return f(to_vec(g), x); }, to_vec(u)), 1e-5);
}

TEST_CASE("cross-entropy loss and logit gradient; negative targets are ignored") {
  const int rows = 4, vocab = 7;
  auto z = testing::random_floats(size_t(rows) * vocab, 15, 3.0);
  std::vector<int> targets{3, -1, 0, 6};
  std::vector<float> losses(rows), dz(z.size());
  auto reference = [&](const Vec& zz) {
    double s = 0;
    for (int r = 0; r < rows; ++r) {
      if (targets[r] < 0) continue;
      double lse = 0;
      for (int v = 0; v < vocab; ++v) lse += std::exp(zz[size_t(r) * vocab + v]);
      s += std::log(lse) - zz[size_t(r) * vocab + targets[r]];
    }
    return s;
  };
  double total = 1.0;  // the op adds the sum / divisor
  mt::cpu::cross_entropy(nullptr, {.rows = rows, .vocab = vocab, .grad_scale = 0.25f, .logits = z.data(),
                                   .targets = targets.data(), .losses = losses.data(), .dlogits = dz.data(),
                                   .sum = &total, .divisor = 4.0});
  CHECK(total == doctest::Approx(1.0 + reference(to_vec(z)) / 4.0).epsilon(1e-6));
  CHECK(losses[1] == 0.0f);
  Vec want = finite_diff(reference, to_vec(z));
  for (double& w : want) w *= 0.25;
  check_close(dz.data(), want, 1e-5);
}

TEST_CASE("embedding backward adds the gradient of every occurrence of a token") {
  const int dim = 3;
  std::vector<int> tokens{2, 0, 2};
  std::vector<float> table(4 * dim, 0.0f), out(3 * dim), dout{1, 2, 3, 4, 5, 6, 7, 8, 9}, dtable(4 * dim, 0.0f);
  for (int i = 0; i < 4 * dim; ++i) table[i] = float(i);
  mt::cpu::embedding_forward(nullptr, {.rows = 3, .dim = dim, .tokens = tokens.data(), .table = table.data(), .out = out.data()});
  CHECK(out == std::vector<float>{6, 7, 8, 0, 1, 2, 6, 7, 8});
  mt::cpu::embedding_backward(nullptr, {.rows = 3, .dim = dim, .tokens = tokens.data(), .dout = dout.data(), .dtable = dtable.data()});
  CHECK(dtable == std::vector<float>{4, 5, 6, 0, 0, 0, 8, 10, 12, 0, 0, 0});
}

TEST_CASE("arena: after the first use, the same allocations need no new memory") {
  mt::Arena arena(mt::cpu_backend());
  for (int i = 0; i < 5; ++i) arena.floats(300000);  // 1.2 MB each: forces several blocks
  const size_t high = arena.high_water();
  arena.reset();
  CHECK(arena.capacity() == high);
  float* first = arena.floats(300000);
  for (int i = 0; i < 4; ++i) arena.floats(300000);
  CHECK(arena.capacity() == high);
  arena.reset();
  CHECK(arena.floats(300000) == first);
}

TEST_CASE("arena: a need that creeps up after the first step reallocates a few times, not every step") {
  // The first step sizes the arena exactly; then each micro-batch needs 1% more than the last, as
  // an expert-parallel rank's arriving rows can. Without spare room every one would reallocate.
  mt::Arena arena(mt::cpu_backend());
  size_t need = 3000000;  // floats: 12 MB
  arena.floats(need);
  arena.reset();
  CHECK(arena.capacity() == need * sizeof(float));
  arena.settle();
  int reallocations = 0;
  size_t capacity = arena.capacity();
  for (int mb = 0; mb < 100; ++mb) {
    need += need / 100;
    arena.floats(need);
    CHECK(arena.capacity() >= arena.high_water());
    arena.reset();
    reallocations += arena.capacity() != capacity;
    capacity = arena.capacity();
    CHECK(capacity <= arena.high_water() + arena.high_water() / 8 + 64);  // at most an eighth to spare
  }
  // 1.01^100 = 2.7 times the start: log(2.7) / log(1.125) = 8.5 regrowths of an eighth.
  CHECK(reallocations <= 10);
  CHECK(reallocations >= 8);
}
