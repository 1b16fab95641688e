#pragma once
// Checks shared by the fused FP8 codes' tests: values over many binades, the recipes and shapes
// every producer is tried with, device room for a producer's codes, the comparison of those codes
// with the separate quantizer's (ops/fp8/quantize_cpu.hpp), and a count of the GEMMs that quantize.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/fp8/quantize_cpu.hpp"
#include "test_helpers.hpp"

namespace fp8_test {

struct Shape {
  int rows, cols;
};
constexpr Shape kShapes[] = {{3, 128}, {5, 200}, {2, 64}, {4, 300}, {1, 1000}, {6, 16}, {2, 129}};

// Values over many binades, so pieces reach FP8's subnormals and its largest codes.
inline std::vector<float> wide_floats(size_t n, uint64_t key) {
  std::vector<float> v = testing::random_floats(n, key);
  for (size_t i = 0; i < n; ++i) v[i] = std::ldexp(v[i], int(i % 29) - 14);
  return v;
}

inline std::vector<mt::Fp8Recipe> recipes() {
  std::vector<mt::Fp8Recipe> out;
  for (mt::Fp8Format f : {mt::Fp8Format::e4m3, mt::Fp8Format::e5m2})
    for (bool pow2 : {true, false})
      for (int tile : {128, 32}) {
        mt::Fp8Recipe r;
        r.forward = r.gradient = f;
        r.pow2_scales = pow2;
        r.tile = tile;
        out.push_back(r);
      }
  return out;
}

// Device room for the codes of [rows, cols], the codes filled with a non-zero byte so that the
// padding is seen to be written.
struct CodesRoom {
  mt::Buffer codes, scales;
  mt::Fp8RowCodes q;
  CodesRoom(const testing::StrictDevice& dev, int rows, int cols, const mt::Fp8Recipe& r,
            mt::Fp8Operand kind = mt::Fp8Operand::activation) {
    q.ld = mt::fp8_pad(cols, mt::kFp8PadK);
    q.rows_pad = mt::fp8_pad(rows, mt::kFp8PadOuter);
    q.tile = r.tile;
    q.format = r.format(kind);
    q.pow2 = r.pow2_scales;
    codes = mt::Buffer(dev.be, mt::DType::u8, size_t(q.rows_pad) * q.ld);
    scales = dev.floats(size_t(rows) * mt::fp8_row_pieces(cols, r.tile));
    const std::vector<uint8_t> junk(codes.count(), 0x5A);
    codes.upload(junk.data(), junk.size());
    q.codes = static_cast<uint8_t*>(codes.raw());
    q.scales = scales.f32();
  }
  mt::Fp8Codes operand() const { return {q.codes, q.scales, q.ld}; }
};

// The fused codes and scales against the separate quantization of y (ops/fp8/quantize_cpu.hpp).
inline void check_as_quantized(const std::vector<float>& y, int rows, int cols, const mt::Fp8Recipe& r,
                        const CodesRoom& room) {
  const mt::cpu::Fp8Matrix want =
      mt::cpu::fp8_quantize(y.data(), rows, cols, {1, r.tile}, room.q.format, r.pow2_scales);
  std::vector<uint8_t> codes(room.codes.count());
  room.codes.download(codes.data(), codes.size());
  const std::vector<float> scales = room.scales.to_host_f32();
  REQUIRE(scales.size() == want.scales.size());
  CHECK(std::memcmp(scales.data(), want.scales.data(), scales.size() * sizeof(float)) == 0);
  size_t differ = 0;
  for (int i = 0; i < room.q.rows_pad; ++i)
    for (int c = 0; c < room.q.ld; ++c) {
      const uint8_t expected = i < rows && c < cols ? want.codes[size_t(i) * cols + c] : 0;
      differ += codes[size_t(i) * room.q.ld + c] != expected;
    }
  CHECK(differ == 0);
}

// f(recipe, shape) for every recipe and shape, both captured for a failure's message.
template <class F>
void for_each_case(F f) {
  for (const mt::Fp8Recipe& r : recipes())
    for (const Shape& s : kShapes) {
      CAPTURE(int(r.forward));
      CAPTURE(r.pow2_scales);
      CAPTURE(r.tile);
      CAPTURE(s.rows);
      CAPTURE(s.cols);
      f(r, s);
    }
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The producer's output written with codes against the one written without, then its codes against
// the quantizer's.
inline void check_fused(const mt::Buffer& with_codes, const mt::Buffer& plain, const Shape& s, const mt::Fp8Recipe& r,
                 const CodesRoom& room) {
  const std::vector<float> values = with_codes.to_host_f32();
  CHECK(same_bits(values, plain.to_host_f32()));
  check_as_quantized(values, s.rows, s.cols, r, room);
}

// run(out, codes) writes a producer's output [s.rows, s.cols] (and its codes, when set) to out:
// once without codes, once with room's; the two outputs the same bits, the codes the quantizer's.
template <class Run>
void check_written(const testing::StrictDevice& dev, const Shape& s, const mt::Fp8Recipe& r, const CodesRoom& room,
                   Run run) {
  const size_t n = size_t(s.rows) * s.cols;
  const mt::Buffer out = dev.floats(n), plain = dev.floats(n);
  run(plain.f32(), mt::Fp8RowCodes{});
  run(out.f32(), room.q);
  check_fused(out, plain, s, r, room);
}

// The FP8 GEMMs that quantized their A operand themselves since last reset (on a GPU each launches
// a memset and three kernels for it), through a backend from counting_backend.
inline int& quantized_a() {
  static int n = 0;
  return n;
}
inline const mt::OpTable*& counted_table() {
  static const mt::OpTable* t = nullptr;
  return t;
}
inline void counting_gemm(mt::DeviceState* s, const mt::GemmArgs& g) {
  if (g.inputs == mt::GemmPrecision::fp8 && !g.fp8_a.codes) ++quantized_a();
  counted_table()->gemm(s, g);
}
// dev's backend with its GEMM counted; `table` holds the wrapped ops for as long as the backend is used.
inline mt::Backend counting_backend(const testing::StrictDevice& dev, mt::OpTable& table) {
  counted_table() = dev.be.ops;
  table = *dev.be.ops;
  table.gemm = counting_gemm;
  mt::Backend be = dev.be;
  be.ops = &table;
  return be;
}

}  // namespace fp8_test
