// Muon: its config keys, the Newton-Schulz op against a float64 SVD and against plain loops of
// the arithmetic ops/optimizer/newton_schulz.hpp states, and the momentum and update ops.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "ops/bf16.hpp"
#include "ops/optimizer/newton_schulz.hpp"
#include "test_helpers.hpp"
#include "train/muon.hpp"

extern "C" void dgesvd_(const char* jobu, const char* jobvt, const int* m, const int* n, double* a, const int* lda,
                        double* s, double* u, const int* ldu, double* vt, const int* ldvt, double* work,
                        const int* lwork, int* info);

namespace {

using testing::contains;

std::vector<float> gaussian(int rows, int cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> m(size_t(rows) * cols);
  for (float& v : m) v = normal(rng);
  return m;
}

mt::NewtonSchulzArgs defaults(int count, int rows, int cols) {
  return {.count = count, .rows = rows, .cols = cols};
}

std::vector<float> through_op(const std::vector<float>& m, mt::NewtonSchulzArgs a) {
  testing::StrictDevice dev;
  mt::Buffer x = dev.upload(m);
  mt::Buffer work = dev.floats(size_t(a.count) * mt::newton_schulz_work(a.rows, a.cols));
  a.x = x.f32(), a.work = work.f32();
  dev.be.newton_schulz(a);
  return x.to_host_f32();
}

// The thin SVD of a row-major [rows, cols] matrix in float64: U [rows, k], s [k], V [cols, k], k = min.
struct Svd {
  std::vector<double> u, s, v;
};
Svd svd(const std::vector<float>& m, int rows, int cols) {
  // LAPACK is column-major: the row-major matrix is its transpose, A^T = V S U^T.
  const int k = std::min(rows, cols), mm = cols, nn = rows, lwork = 8 * (rows + cols) * 4;
  std::vector<double> a(m.begin(), m.end()), s(k, 0.0), uu(size_t(mm) * k, 0.0), vt(size_t(k) * nn, 0.0),
      w(lwork, 0.0);
  int info = 0;
  dgesvd_("S", "S", &mm, &nn, a.data(), &mm, s.data(), uu.data(), &mm, vt.data(), &k, w.data(), &lwork, &info);
  REQUIRE(info == 0);
  Svd out{std::vector<double>(size_t(rows) * k), s, std::vector<double>(size_t(cols) * k)};
  // A^T = uu diag(s) vt, so A = vt^T diag(s) uu^T: U = vt^T, V = uu.
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < k; ++j) out.u[size_t(r) * k + j] = vt[size_t(r) * k + j];
  for (int c = 0; c < cols; ++c)
    for (int j = 0; j < k; ++j) out.v[size_t(c) * k + j] = uu[size_t(j) * mm + c];
  return out;
}

// The arithmetic of ops/optimizer/newton_schulz.hpp written out element by element.
std::vector<float> direct(std::vector<float> m, int rows, int cols, const mt::NewtonSchulzArgs& a) {
  const bool tall = rows > cols, bf16 = a.inputs == mt::GemmPrecision::bf16;
  const int s = std::min(rows, cols), l = std::max(rows, cols);
  auto in = [&](float v) { return bf16 ? mt::round_to_bf16(v) : v; };
  std::vector<float> x(size_t(s) * l), gram(size_t(s) * s), poly(gram.size()), y(x.size());
  for (int i = 0; i < s; ++i)
    for (int j = 0; j < l; ++j) x[size_t(i) * l + j] = tall ? m[size_t(j) * cols + i] : m[size_t(i) * cols + j];
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const float inv = float(1.0 / std::max(std::sqrt(ss), a.eps));
  for (float& v : x) v *= inv;
  for (int step = 0; step < a.steps; ++step) {
    for (int i = 0; i < s; ++i)
      for (int j = 0; j < s; ++j) {
        float acc = 0;
        for (int k = 0; k < l; ++k) acc += in(x[size_t(i) * l + k]) * in(x[size_t(j) * l + k]);
        gram[size_t(i) * s + j] = acc;
      }
    for (int i = 0; i < s; ++i)
      for (int j = 0; j < s; ++j) {
        float acc = 0;
        for (int k = 0; k < s; ++k) acc += in(gram[size_t(i) * s + k]) * in(gram[size_t(k) * s + j]);
        poly[size_t(i) * s + j] = a.b * gram[size_t(i) * s + j] + a.c * acc;
      }
    for (int i = 0; i < s; ++i)
      for (int j = 0; j < l; ++j) {
        float acc = 0;
        for (int k = 0; k < s; ++k) acc += in(poly[size_t(i) * s + k]) * in(x[size_t(k) * l + j]);
        y[size_t(i) * l + j] = acc;
      }
    for (size_t i = 0; i < x.size(); ++i) x[i] = a.a * x[i] + y[i];
  }
  for (int i = 0; i < s; ++i)
    for (int j = 0; j < l; ++j) (tall ? m[size_t(j) * cols + i] : m[size_t(i) * cols + j]) = x[size_t(i) * l + j];
  return m;
}

struct Shape {
  const char* name;
  int rows, cols;
};
const Shape kShapes[] = {{"square", 16, 16}, {"wide", 8, 24}, {"tall", 24, 8}};

}  // namespace

// The quintic with the default coefficients does not reach U V^T. It maps each singular value x (as
// a share of the Frobenius norm) by p(x) = a x + b x^3 + c x^5, and five steps take every x in
// [2e-3, 1] into [0.68, 1.21] (p iterated in float64 over that range: 0.6818 to 1.2024); torch.optim.Muon's
// docstring says "about Uniform(0.5, 1.5)". The singular vectors stay: U^T O V is diagonal.
TEST_CASE("newton_schulz: singular values in the quintic's band, singular vectors of a float64 SVD") {
  for (const Shape& sh : kShapes) {
    CAPTURE(sh.name);
    const std::vector<float> m = gaussian(sh.rows, sh.cols, 7);
    const Svd d = svd(m, sh.rows, sh.cols);
    const int k = std::min(sh.rows, sh.cols);
    double frobenius = 0;
    for (double s : d.s) frobenius += s * s;
    REQUIRE(d.s[size_t(k) - 1] / std::sqrt(frobenius) >= 2e-3);  // the band's premise
    const std::vector<float> o = through_op(m, defaults(1, sh.rows, sh.cols));
    double diagonal_low = 2, diagonal_high = 0, off = 0;
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < k; ++j) {
        double uov = 0;  // (U^T O V)[i][j]
        for (int r = 0; r < sh.rows; ++r)
          for (int c = 0; c < sh.cols; ++c)
            uov += d.u[size_t(r) * k + i] * o[size_t(r) * sh.cols + c] * d.v[size_t(c) * k + j];
        if (i == j) diagonal_low = std::min(diagonal_low, uov), diagonal_high = std::max(diagonal_high, uov);
        else off = std::max(off, std::abs(uov));
      }
    CHECK(diagonal_low >= 0.68);
    CHECK(diagonal_high <= 1.21);
    CHECK(off < 1e-4);
  }
}

TEST_CASE("newton_schulz: bitwise the arithmetic it states, in fp32 and with bf16 factors, batched") {
  for (const Shape& sh : kShapes)
    for (mt::GemmPrecision inputs : {mt::GemmPrecision::fp32, mt::GemmPrecision::bf16}) {
      CAPTURE(sh.name);
      const int count = 3;
      const size_t each = size_t(sh.rows) * sh.cols;
      std::vector<float> m = gaussian(sh.rows * count, sh.cols, 11);
      mt::NewtonSchulzArgs a = defaults(count, sh.rows, sh.cols);
      a.inputs = inputs;
      const std::vector<float> got = through_op(m, a);
      for (int i = 0; i < count; ++i) {
        const std::vector<float> one(m.begin() + i * each, m.begin() + (i + 1) * each);
        const std::vector<float> want = direct(one, sh.rows, sh.cols, a);
        CHECK(std::equal(want.begin(), want.end(), got.begin() + i * each));
      }
    }
}

TEST_CASE("newton_schulz: a zero matrix stays zero (the norm's floor eps)") {
  const std::vector<float> o = through_op(std::vector<float>(12, 0.0f), defaults(1, 3, 4));
  CHECK(std::all_of(o.begin(), o.end(), [](float v) { return v == 0.0f; }));
}

TEST_CASE("muon_momentum and muon_apply: torch.optim.Muon's rules, nothing moves when the guard fails") {
  testing::StrictDevice dev;
  mt::Buffer grad = dev.upload({1.0f, -2.0f}), buf = dev.upload({0.5f, 0.25f}), update = dev.floats(2);
  mt::Buffer value = dev.upload({1.0f, 2.0f});
  const mt::MuonStepValues step{.lr = 0.1, .decay = 0.01};
  mt::Buffer step_buf(dev.be, mt::DType::u8, sizeof step);
  step_buf.upload(&step, sizeof step);
  const double bad_host[2] = {NAN, 0.0};
  mt::Buffer bad(dev.be, mt::DType::u8, sizeof bad_host);
  bad.upload(bad_host, sizeof bad_host);
  for (const double* guard : {static_cast<const double*>(bad.raw()), static_cast<const double*>(nullptr)}) {
    dev.be.muon_momentum({.n = 2, .momentum = 0.5f, .nesterov = true, .grad = grad.f32(), .buf = buf.f32(),
                          .update = update.f32(), .guard = guard});
    dev.be.muon_apply({.n = 2, .step = static_cast<const mt::MuonStepValues*>(step_buf.raw()), .scale = 2.0,
                       .update = update.f32(), .value = value.f32(), .guard = guard});
  }
  // buf = 0.5 buf + 0.5 g; update = g + 0.5 (buf - g); value -= 0.01 value + 0.2 update.
  CHECK(buf.to_host_f32() == std::vector<float>{0.75f, -0.875f});
  CHECK(update.to_host_f32() == std::vector<float>{0.875f, -1.4375f});
  CHECK(value.to_host_f32() == std::vector<float>{1.0f - 0.01f - 0.2f * 0.875f, 2.0f - 0.02f + 0.2f * 1.4375f});
}

TEST_CASE("which parameters Muon updates, and the update scale of each rule") {
  mt::OptimizerConfig cfg;
  cfg.kind = mt::OptimizerKind::muon;
  mt::ParamInfo p;
  p.shape = {4, 96, 32}, p.name = "blocks.1.moe.experts.w_up";
  mt::MuonMatrix e = mt::muon_matrix(p, cfg);
  CHECK((e.muon && e.count == 4 && e.rows == 96 && e.cols == 32));
  CHECK(e.scale == doctest::Approx(0.2 * std::sqrt(96.0)));
  cfg.muon.scale = mt::MuonScale::original;
  CHECK(mt::muon_matrix(p, cfg).scale == doctest::Approx(std::sqrt(3.0)));
  p.shape = {32, 96}, p.name = "blocks.0.attn.wo";
  CHECK(mt::muon_matrix(p, cfg).scale == 1.0);
  // A tensor-parallel slice is orthogonalised and scaled as the whole matrix it is joined into.
  p.shape = {48, 32}, p.global_shape = {96, 32}, p.split_dim = 0;
  const mt::MuonMatrix slice = mt::muon_matrix(p, cfg);
  CHECK((slice.count == 1 && slice.rows == 96 && slice.cols == 32 && slice.scale == doctest::Approx(std::sqrt(3.0))));
  p.global_shape = {}, p.split_dim = -1;
  for (const char* adamw : {"embedding", "head"}) {
    p.name = adamw;
    CHECK_FALSE(mt::muon_matrix(p, cfg).muon);
  }
  p.shape = {32}, p.name = "blocks.0.attn_norm";
  CHECK_FALSE(mt::muon_matrix(p, cfg).muon);
  p.shape = {8, 32}, p.name = "blocks.1.moe.router";
  CHECK(mt::muon_matrix(p, cfg).muon);
  cfg.muon.router = mt::RouterOptimizer::adamw;
  CHECK_FALSE(mt::muon_matrix(p, cfg).muon);
  cfg.kind = mt::OptimizerKind::adamw;
  p.name = "blocks.0.attn.wo";
  CHECK_FALSE(mt::muon_matrix(p, cfg).muon);
}

TEST_CASE("optimizer keys: errors name the key and what is allowed") {
  auto error_of = [](const std::string& text) {
    return testing::user_error_of([&] { mt::parse_config(text, "exp.toml", {}); });
  };
  CHECK(contains(error_of("[optimizer]\nkind = \"lion\"\n"),
                 "optimizer.kind must be one of \"adamw\" | \"muon\", got \"lion\""));
  CHECK(contains(error_of("[optimizer.muon]\nscale = \"spectral\"\n"),
                 "optimizer.muon.scale must be one of \"original\" | \"match_rms_adamw\""));
  CHECK(contains(error_of("[optimizer.muon]\nns_coefficients = [1.0, 2.0]\n"),
                 "optimizer.muon.ns_coefficients must be an array of 3 finite numbers, got 2 values"));
  CHECK(contains(error_of("[optimizer.muon]\nns_coefficients = [1.0, \"b\", 2.0]\n"), "got a string at position 2"));
  CHECK(contains(error_of("[optimizer.muon]\nmomentum = 1.0\n"), "optimizer.muon.momentum must be [0, 1), got 1"));
  // Every layout runs Muon: ZeRO's pieces and tensor-parallel slices are joined for the iteration.
  for (const char* layout : {"dp = 2\nzero = 1\n", "dp = 2\nzero = 3\n", "tp = 2\n", "dp = 2\nep = 2\n"})
    CHECK(error_of(std::string("[optimizer]\nkind = \"muon\"\n[parallel]\n") + layout).empty());
  const mt::Config c = mt::parse_config("[optimizer.muon]\nns_coefficients = [3, -4.5, 2]\n", "exp.toml", {});
  CHECK((c.optimizer.muon.ns_a == 3.0 && c.optimizer.muon.ns_b == -4.5 && c.optimizer.muon.ns_c == 2.0));
  CHECK(contains(c.resolved_toml, "ns_coefficients = [ 3.0, -4.5, 2.0 ]"));
}
