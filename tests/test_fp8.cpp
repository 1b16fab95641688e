// FP8: the formats against a brute-force nearest-value search, scales and pieces, the quantized
// GEMM against float64 products of the quantized operands, and the accumulator model.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ops/bf16.hpp"
#include "ops/backend/cpu_ops.hpp"
#include "ops/fp8/quantize_cpu.hpp"
#include "test_helpers.hpp"

using mt::Fp8Format;

namespace {

// The code an exact round-to-nearest-even conversion with saturation gives, by trying every code.
uint8_t nearest_code(float x, Fp8Format f) {
  const mt::Fp8Layout l = mt::fp8_layout(f);
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return sign | l.nan_code;
  const double a = std::min<double>(std::fabs(x), l.max_value);
  int best = 0;
  double best_diff = INFINITY;
  for (int c = 0; c <= l.max_code; ++c) {
    const double d = std::fabs(double(mt::fp8_to_float(uint8_t(c), f)) - a);
    if (d < best_diff || (d == best_diff && (c & 1) == 0)) best = c, best_diff = d;
  }
  return uint8_t(sign | best);
}

const char* name(Fp8Format f) { return f == Fp8Format::e4m3 ? "e4m3" : "e5m2"; }

}  // namespace

TEST_CASE("fp8 conversion: every bf16 value goes to the nearest code (ties to even), saturating") {
  for (Fp8Format f : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    CAPTURE(name(f));
    int wrong = 0;
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      const float x = mt::bf16_bits_to_float(uint16_t(bits));
      if (std::isinf(x)) continue;  // saturates like the largest finite value; checked below
      if (mt::float_to_fp8(x, f) != nearest_code(x, f)) ++wrong;
    }
    CHECK(wrong == 0);
    const mt::Fp8Layout l = mt::fp8_layout(f);
    CHECK(mt::float_to_fp8(INFINITY, f) == l.max_code);
    CHECK(mt::float_to_fp8(-1e30f, f) == (0x80 | l.max_code));
    CHECK(std::isnan(mt::fp8_to_float(mt::float_to_fp8(NAN, f), f)));
  }
  CHECK(mt::fp8_to_float(0x7E, Fp8Format::e4m3) == 448.0f);
  CHECK(mt::fp8_to_float(0x7B, Fp8Format::e5m2) == 57344.0f);
  CHECK(mt::fp8_to_float(0x01, Fp8Format::e4m3) == std::ldexp(1.0f, -9));   // smallest subnormal
  CHECK(mt::fp8_to_float(0x01, Fp8Format::e5m2) == std::ldexp(1.0f, -16));
  CHECK(mt::float_to_fp8(std::ldexp(1.0f, -10), Fp8Format::e4m3) == 0x00);  // half the smallest: tie to even
  CHECK(mt::float_to_fp8(-0.0f, Fp8Format::e4m3) == 0x80);
}

TEST_CASE("fp8 conversion: random fp32 values of every magnitude, and every code round-trips") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (Fp8Format f : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    CAPTURE(name(f));
    int wrong = 0;
    for (int i = 0; i < 200000; ++i) {
      uint32_t u = bits(rng);
      u = (u & 0x807FFFFF) | ((100 + u % 60) << 23);  // exponents 2^-27 .. 2^32: subnormal to saturated
      float x;
      std::memcpy(&x, &u, 4);
      if (mt::float_to_fp8(x, f) != nearest_code(x, f)) ++wrong;
    }
    CHECK(wrong == 0);
    for (int c = 0; c < 256; ++c) {
      const float v = mt::fp8_to_float(uint8_t(c), f);
      if (std::isfinite(v) && v != 0.0f) CHECK(mt::float_to_fp8(v, f) == c);
    }
    // The emulation's shortcut gives the value of the code, for every bf16 value.
    int shortcut_wrong = 0;
    for (uint32_t b = 0; b < 0x10000; ++b) {
      const float x = mt::bf16_bits_to_float(uint16_t(b));
      const float want = mt::fp8_to_float(mt::float_to_fp8(x, f), f), got = mt::round_to_fp8(x, f);
      if (!(got == want || (std::isnan(got) && std::isnan(want)))) ++shortcut_wrong;
    }
    CHECK(shortcut_wrong == 0);
  }
}

TEST_CASE("fp8 scales: a power of two covering amax, or amax / max exactly") {
  for (float amax : {1e-6f, 0.3f, 1.0f, 448.0f, 449.0f, 1e6f}) {
    CAPTURE(amax);
    const float s = mt::fp8_scale(amax, Fp8Format::e4m3, true);
    int e = 0;
    CHECK(std::frexp(s, &e) == 0.5f);  // a power of two
    CHECK(amax / s <= 448.0f);
    CHECK(amax / s > 224.0f);          // the smallest such power: the range is used
    CHECK(mt::fp8_scale(amax, Fp8Format::e4m3, false) == amax / 448.0f);
  }
  CHECK(mt::fp8_scale(0.0f, Fp8Format::e4m3, true) == 1.0f);
}

TEST_CASE("fp8 pieces: tiles along K in either orientation, weight blocks, or one per tensor") {
  mt::Fp8Recipe r;
  r.tile = 4;
  r.block = 3;
  using mt::Fp8Operand;
  auto shape = [&](Fp8Operand kind, bool k_rows) { return mt::cpu::fp8_pieces(r, kind, k_rows, 10, 7); };
  CHECK(shape(Fp8Operand::activation, false).rows == 1);
  CHECK(shape(Fp8Operand::activation, false).cols == 4);
  CHECK(shape(Fp8Operand::gradient, true).rows == 4);  // Wgrad: K runs over tokens, down the rows
  CHECK(shape(Fp8Operand::gradient, true).cols == 1);
  CHECK(shape(Fp8Operand::weight, true).rows == 3);
  CHECK(shape(Fp8Operand::weight, false).cols == 3);
  r.per_tensor = true;
  CHECK(shape(Fp8Operand::activation, false).rows == 10);
  CHECK(shape(Fp8Operand::activation, false).cols == 7);

  // Each piece's scale follows its own largest value; values already on the grid come back exactly.
  std::vector<float> x(10 * 7);
  for (int i = 0; i < 70; ++i) x[i] = mt::fp8_to_float(uint8_t((i * 37) % 0x7E), Fp8Format::e4m3) * float(1 << (i % 7));
  const mt::cpu::Fp8Matrix q = mt::cpu::fp8_quantize(x.data(), 10, 7, {1, 4}, Fp8Format::e4m3, true);
  CHECK(q.scales.size() == 10 * 2);
  for (int r0 = 0; r0 < 10; ++r0)
    for (int c0 = 0; c0 < 7; c0 += 4) {
      float amax = 0;
      for (int c = c0; c < std::min(7, c0 + 4); ++c) amax = std::max(amax, std::fabs(x[r0 * 7 + c]));
      CHECK(q.scale_at(r0, c0) == mt::fp8_scale(amax, Fp8Format::e4m3, true));
    }
  const std::vector<float> back = mt::cpu::fp8_dequantize(q);
  CHECK(mt::cpu::fp8_round_trip(x.data(), 10, 7, {1, 4}, Fp8Format::e4m3, true) == back);
  const std::vector<float> random = testing::random_floats(70, 3, 5.0);
  const mt::cpu::Fp8Matrix qr = mt::cpu::fp8_quantize(random.data(), 10, 7, {1, 4}, Fp8Format::e4m3, true);
  const std::vector<float> random_back = mt::cpu::fp8_dequantize(qr);
  for (int i = 0; i < 70; ++i) {
    CAPTURE(i);
    // Exact where the pieces' scales divide the grid values without leaving the subnormal range.
    if (std::fabs(x[i]) >= q.scale_at(i / 7, i % 7) * std::ldexp(1.0f, -6)) CHECK(back[i] == x[i]);
    // E4M3 keeps 3 fraction bits: within 1/16 relative, or the subnormal step of the piece.
    CHECK(std::fabs(random_back[i] - random[i]) <=
          std::max(std::fabs(random[i]) / 16, qr.scale_at(i / 7, i % 7) * std::ldexp(1.0f, -10)));
  }
}

TEST_CASE("fp8 GEMM: the product of the quantized operands, for forward, Dgrad and Wgrad") {
  mt::Fp8Recipe r;
  r.tile = 8;
  r.block = 8;
  const int m = 13, n = 11, k = 20;
  using mt::Fp8Operand;
  struct Form { const char* name; bool ta, tb; Fp8Operand a, b; };
  const Form forms[] = {{"forward x W^T", false, true, Fp8Operand::activation, Fp8Operand::weight},
                        {"dgrad dy W", false, false, Fp8Operand::gradient, Fp8Operand::weight},
                        {"wgrad dy^T x", true, false, Fp8Operand::gradient, Fp8Operand::activation}};
  for (bool e5m2 : {false, true})
    for (const Form& f : forms) {
      CAPTURE(f.name);
      CAPTURE(e5m2);
      r.gradient = e5m2 ? Fp8Format::e5m2 : Fp8Format::e4m3;
      const std::vector<float> a = testing::random_floats(size_t(m) * k, 11, 3.0), b = testing::random_floats(size_t(k) * n, 12);
      const int a_rows = f.ta ? k : m, a_cols = f.ta ? m : k, b_rows = f.tb ? n : k, b_cols = f.tb ? k : n;
      std::vector<float> c(size_t(m) * n, 0.0f), plain = c;
      mt::GemmArgs g{.m = m, .n = n, .k = k, .a = a.data(), .trans_a = f.ta, .b = b.data(), .trans_b = f.tb,
                     .c = c.data(), .inputs = mt::GemmPrecision::fp8, .fp8 = {&r, f.a, f.b}};
      mt::cpu::gemm(nullptr, g);
      g.c = plain.data();
      g.inputs = mt::GemmPrecision::fp32;
      mt::cpu::gemm(nullptr, g);
      // The operands as the recipe quantizes them, multiplied in float64.
      const auto qa = mt::cpu::fp8_dequantize(mt::cpu::fp8_quantize(
          a.data(), a_rows, a_cols, mt::cpu::fp8_pieces(r, f.a, f.ta, a_rows, a_cols), r.format(f.a), true));
      const auto qb = mt::cpu::fp8_dequantize(mt::cpu::fp8_quantize(
          b.data(), b_rows, b_cols, mt::cpu::fp8_pieces(r, f.b, !f.tb, b_rows, b_cols), r.format(f.b), true));
      double differs = 0;
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double want = 0;
          for (int p = 0; p < k; ++p)
            want += double(f.ta ? qa[size_t(p) * m + i] : qa[size_t(i) * k + p]) *
                    (f.tb ? qb[size_t(j) * k + p] : qb[size_t(p) * n + j]);
          CHECK(c[size_t(i) * n + j] == doctest::Approx(want).epsilon(1e-5).scale(1e-5));
          differs = std::max(differs, std::fabs(double(c[size_t(i) * n + j]) - plain[size_t(i) * n + j]));
        }
      CHECK(differs > 1e-3);  // quantization happened
    }
}

TEST_CASE("fp8 accumulator model: a 14-bit partial sum drifts over K = 4096; promotion every 128 holds it") {
  const int K = 4096;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);  // one sign: truncation errors add up
  std::vector<float> a(K), b(K);
  for (int i = 0; i < K; ++i) a[i] = uniform(rng), b[i] = uniform(rng);
  // Quantization is not what this measures: fp32-scaled E4M3 grid values pass through unchanged.
  mt::Fp8Recipe r;
  r.per_tensor = true;
  for (int i = 0; i < K; ++i) a[i] = mt::round_to_fp8(a[i], Fp8Format::e4m3), b[i] = mt::round_to_fp8(b[i], Fp8Format::e4m3);
  double exact = 0;
  for (int i = 0; i < K; ++i) exact += double(a[i]) * b[i];
  auto error = [&](int bits, int promote) {
    r.accumulator_bits = bits;
    r.promote_every = promote;
    float c = 0;
    mt::cpu::gemm(nullptr, {.m = 1, .n = 1, .k = K, .a = a.data(), .b = b.data(), .trans_b = true, .c = &c,
                            .inputs = mt::GemmPrecision::fp8,
                            .fp8 = {&r, mt::Fp8Operand::activation, mt::Fp8Operand::weight}});
    return std::fabs(c - exact) / exact;
  };
  const double fp32 = error(0, 0), drift = error(14, 0), promoted = error(14, 128);
  MESSAGE("relative error: fp32 sum " << fp32 << ", 14 bits without promotion " << drift
                                      << ", 14 bits promoted every 128 " << promoted);
  CHECK(fp32 < 1e-5);
  CHECK(drift > 0.01);
  CHECK(promoted < 0.001);
  CHECK(promoted < drift / 20);
}

TEST_CASE("fp8 row packing for the expert dispatch: a quarter of the bytes, the values the GEMM would quantize") {
  for (int cols : {7, 128, 300}) {
    CAPTURE(cols);
    const int rows = 5, tile = 128;
    const std::vector<float> x = testing::random_floats(size_t(rows) * cols, 31, 40.0);
    const int row_floats = mt::fp8_packed_row_floats(cols, tile);
    CHECK(row_floats * 4 <= cols + 3 + 4 * ((cols + tile - 1) / tile));
    std::vector<float> packed(size_t(rows) * row_floats), back(x.size());
    mt::cpu::fp8_pack_rows(nullptr, {.rows = rows, .cols = cols, .tile = tile, .format = Fp8Format::e4m3,
                                     .pow2_scales = true, .x = x.data(), .packed = packed.data()});
    mt::cpu::fp8_unpack_rows(nullptr, {.rows = rows, .cols = cols, .tile = tile, .format = Fp8Format::e4m3,
                                       .packed = packed.data(), .x = back.data()});
    CHECK(back == mt::cpu::fp8_round_trip(x.data(), rows, cols, {1, tile}, Fp8Format::e4m3, true));
    // Quantizing the unpacked rows again changes nothing: the experts see what one rank sees.
    CHECK(mt::cpu::fp8_round_trip(back.data(), rows, cols, {1, tile}, Fp8Format::e4m3, true) == back);
  }
}
