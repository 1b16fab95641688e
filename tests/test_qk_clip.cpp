// QK-Clip: the attention op's per-head largest logit against a direct loop (packed, strided, grouped,
// bfloat16 inputs, accumulated over calls), the row rescaling op, and the config's keys and refusals.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "config/config.hpp"
#include "ops/bf16.hpp"
#include "test_helpers.hpp"

namespace {

std::vector<float> gaussian(size_t n, unsigned seed, float std) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, std);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

struct Case {
  int batch = 2, seq = 7, heads = 4, kv_heads = 4, dim = 6;
  int q_row = 0, k_row = 0;  // row strides (0: packed)
  bool bf16 = false;
};

// max over b, t, s <= t of scale * q[b,t,h] . k[b,s,h / group], the products' inputs rounded as the op rounds them.
std::vector<float> direct(const Case& c, const std::vector<float>& q, const std::vector<float>& k, float scale) {
  const int qr = c.q_row ? c.q_row : c.heads * c.dim, kr = c.k_row ? c.k_row : c.kv_heads * c.dim;
  const int group = c.heads / c.kv_heads;
  auto in = [&](float v) { return c.bf16 ? mt::round_to_bf16(v) : v; };
  std::vector<float> out(size_t(c.heads), -INFINITY);
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (int t = 0; t < c.seq; ++t)
        for (int s = 0; s <= t; ++s) {
          double dot = 0;
          for (int f = 0; f < c.dim; ++f)
            dot += double(in(q[size_t(b * c.seq + t) * qr + size_t(h) * c.dim + f])) *
                   in(k[size_t(b * c.seq + s) * kr + size_t(h / group) * c.dim + f]);
          out[size_t(h)] = std::max(out[size_t(h)], float(scale * dot));
        }
  return out;
}

// The op's max_logit after one forward on a buffer holding `start`.
std::vector<float> through_op(const Case& c, const std::vector<float>& q, const std::vector<float>& k, float scale,
                              const std::vector<float>& start) {
  testing::StrictDevice dev;
  const int rows = c.batch * c.seq;
  mt::Buffer dq = dev.upload(q), dk = dev.upload(k), dv = dev.floats(size_t(rows) * c.kv_heads * c.dim);
  mt::Buffer out = dev.floats(size_t(rows) * c.heads * c.dim), lse = dev.floats(size_t(rows) * c.heads);
  mt::Buffer mx = dev.upload(start);
  dev.be.attention_forward({.batch = c.batch, .seq = c.seq, .heads = c.heads, .qk_dim = c.dim, .v_dim = c.dim,
                            .scale = scale, .q = dq.f32(), .k = dk.f32(), .v = dv.f32(), .out = out.f32(),
                            .lse = lse.f32(),
                            .inputs = c.bf16 ? mt::GemmPrecision::bf16 : mt::GemmPrecision::fp32,
                            .kv_heads = c.kv_heads, .q_at = {.row = c.q_row}, .k_at = {.row = c.k_row},
                            .max_logit = mx.f32()});
  return mx.to_host_f32();
}

void check_case(const Case& c) {
  const int qr = c.q_row ? c.q_row : c.heads * c.dim, kr = c.k_row ? c.k_row : c.kv_heads * c.dim;
  const size_t rows = size_t(c.batch) * c.seq;
  const std::vector<float> q = gaussian(rows * qr, 1, 1.0f), k = gaussian(rows * kr, 2, 1.0f);
  const float scale = 0.4f;
  const std::vector<float> want = direct(c, q, k, scale);
  const std::vector<float> got = through_op(c, q, k, scale, std::vector<float>(size_t(c.heads), -1e30f));
  for (int h = 0; h < c.heads; ++h) CHECK(got[size_t(h)] == doctest::Approx(want[size_t(h)]).epsilon(1e-5));
  // The op max-accumulates: a start above every head's maximum stays.
  const std::vector<float> kept = through_op(c, q, k, scale, std::vector<float>(size_t(c.heads), 1e3f));
  for (float v : kept) CHECK(v == 1e3f);
}

}  // namespace

TEST_CASE("attention's max_logit: each head's largest scaled causal logit, as a direct loop computes it") {
  SUBCASE("packed") { check_case({}); }
  SUBCASE("grouped key heads") { check_case({.kv_heads = 2}); }
  SUBCASE("strided rows") { check_case({.heads = 3, .kv_heads = 3, .dim = 4, .q_row = 20, .k_row = 13}); }
  SUBCASE("bfloat16 inputs") { check_case({.heads = 2, .kv_heads = 1, .bf16 = true}); }
}

TEST_CASE("attention's max_logit leaves out the masked logits") {
  // Sequence of 3, one head: only the last key has a large logit, and only the last query sees it.
  const Case c{.batch = 1, .seq = 3, .heads = 1, .kv_heads = 1, .dim = 1};
  const std::vector<float> q{1, 1, -1}, k{0.5f, 1, 10};
  // Unmasked the largest would be q0 . k2 = 10; the causal largest is q1 . k1 = 1 (q2 . k2 = -10).
  const std::vector<float> got = through_op(c, q, k, 1.0f, {-1e30f});
  CHECK(got[0] == 1.0f);
}

TEST_CASE("qk_clip_rows rescales the chosen rows of the heads above tau by (tau / S)^power") {
  testing::StrictDevice dev;
  const int heads = 3, head_rows = 4, cols = 2;
  const std::vector<float> w0 = gaussian(size_t(heads) * head_rows * cols, 3, 1.0f);
  // Two copies of the per-head maxima (two ranks): head 0 is under tau in both, head 1 above in the
  // second, head 2 above in both (the larger counts).
  const std::vector<float> maxima{1.0f, 3.0f, 8.0f, 1.5f, 6.0f, 4.0f};
  mt::Buffer w = dev.upload(w0), m = dev.upload(maxima);
  dev.be.qk_clip_rows({.w = w.f32(), .heads = heads, .head_rows = head_rows, .cols = cols, .begin = 1, .end = 3,
                       .power = 0.5f, .tau = 2.0f, .max_logit = m.f32(), .copies = 2, .stride = 3});
  const std::vector<float> got = w.to_host_f32();
  const float factor[] = {1.0f, std::sqrt(2.0f / 6.0f), std::sqrt(2.0f / 8.0f)};
  for (int h = 0; h < heads; ++h)
    for (int r = 0; r < head_rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const size_t i = (size_t(h) * head_rows + r) * cols + c;
        const float f = r >= 1 && r < 3 ? factor[h] : 1.0f;
        CHECK(got[i] == w0[i] * f);
      }
}

TEST_CASE("optimizer.qk_clip: keys, defaults, and ZeRO-3 refused") {
  const mt::Config d = mt::parse_config("", "exp.toml", {});
  CHECK_FALSE(d.optimizer.qk_clip.enabled);
  CHECK(d.optimizer.qk_clip.tau == 100);
  const mt::Config c = mt::parse_config("[optimizer.qk_clip]\nenabled = true\ntau = 30\n", "exp.toml", {});
  CHECK(c.optimizer.qk_clip.enabled);
  CHECK(c.optimizer.qk_clip.tau == 30);
  auto error_of = [](const std::string& text) {
    return testing::user_error_of([&] { mt::parse_config(text, "exp.toml", {}); });
  };
  CHECK(testing::contains(error_of("[optimizer.qk_clip]\ntau = 0\n"), "optimizer.qk_clip.tau"));
  const std::string zero =
      error_of("[optimizer.qk_clip]\nenabled = true\n[parallel]\ndp = 2\nzero = 3\n");
  CHECK(testing::contains(zero, "exp.toml:5:8: parallel.zero = 3 keeps only pieces"));
  CHECK(testing::user_error_of([&] {
          mt::parse_config("[optimizer.qk_clip]\nenabled = true\n[parallel]\ndp = 2\nzero = 2\n", "exp.toml", {});
        }).empty());
}
