// The rest of the bfloat16 data path (precision.bf16_outputs): RoPE reading bfloat16, the residual
// adds (RMSNorm's fused add and the block's add) reading a bfloat16 projection output, SwiGLU's
// backward reading a bfloat16 hidden gradient and a Dgrad GEMM writing it. Each equals its fp32
// version fed the same (bfloat16-representable) values, rounded where it stores, bit for bit.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "model/layer_env.hpp"
#include "ops/bf16.hpp"
#include "test_helpers.hpp"

namespace {

struct Bf16Values {
  mt::Buffer bytes;
  Bf16Values(const testing::StrictDevice& dev, size_t n) : bytes(dev.be, mt::DType::u8, 2 * n) {}
  mt::Bf16* ptr() const { return static_cast<mt::Bf16*>(bytes.raw()); }
  std::vector<uint16_t> bits() const {
    std::vector<uint16_t> out(bytes.count() / 2);
    bytes.download(out.data(), bytes.count());
    return out;
  }
  void set(const std::vector<uint16_t>& b) const { bytes.upload(b.data(), 2 * b.size()); }
};

// n random values rounded to bfloat16: their bits and the same values in fp32.
struct Representable {
  std::vector<uint16_t> bits;
  std::vector<float> values;
  Representable(size_t n, uint64_t seed, double scale = 1.0) {
    for (float v : testing::random_floats(n, seed, scale)) {
      bits.push_back(mt::float_to_bf16_bits(v));
      values.push_back(mt::bf16_bits_to_float(bits.back()));
    }
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("bf16 rest: RoPE reading bfloat16 writes what it writes from the same values in fp32") {
  struct Case {
    int heads, head_dim, rot_offset, rot_dim;
    bool inverse;
  };
  // MHA's whole heads, MLA's rotary tail after the nope features, an odd rotary width, the backward.
  const Case cases[] = {{3, 8, 0, 8, false}, {2, 12, 8, 4, false}, {1, 9, 2, 7, false}, {3, 8, 0, 8, true}};
  for (const Case& c : cases) {
    CAPTURE(c.rot_offset);
    CAPTURE(c.inverse);
    testing::StrictDevice dev;
    const int rows = 10, seq = 5;
    const size_t n = size_t(rows) * c.heads * c.head_dim;
    const Representable x(n, 21, 3.0);
    Bf16Values in(dev, n), out(dev, n), out_plain(dev, n);
    in.set(x.bits);
    const mt::Buffer x32 = dev.upload(x.values);
    mt::RopeArgs a{.rows = rows, .heads = c.heads, .head_dim = c.head_dim, .rot_offset = c.rot_offset,
                   .rot_dim = c.rot_dim, .seq_len = seq, .first_position = 1, .theta = 500.0f, .inverse = c.inverse,
                   .x = x32.f32(), .out_bf16 = out_plain.ptr()};
    dev.be.rope(a);
    a.x = nullptr, a.x_bf16 = in.ptr(), a.out_bf16 = out.ptr();
    dev.be.rope(a);
    CHECK(out.bits() == out_plain.bits());
    CHECK(in.bits() == x.bits);  // only read
  }
}

TEST_CASE("bf16 rest: RMSNorm's residual add reading a bfloat16 output equals the fp32 add of its values") {
  testing::StrictDevice dev;
  const int rows = 7, dim = 40;
  const size_t n = size_t(rows) * dim;
  const Representable out(n, 31, 2.0);
  const mt::Buffer residual = dev.upload(testing::random_floats(n, 32));
  const mt::Buffer w = dev.upload(testing::random_floats(dim, 33));
  const mt::Buffer x32 = dev.upload(out.values), sum = dev.floats(n), sum_plain = dev.floats(n);
  const mt::Buffer rstd = dev.floats(rows), rstd_plain = dev.floats(rows);
  Bf16Values x16(dev, n), y(dev, n), y_plain(dev, n);
  x16.set(out.bits);
  dev.be.rmsnorm_forward({.rows = rows, .dim = dim, .x = x32.f32(), .weight = w.f32(), .rstd = rstd_plain.f32(),
                          .y_bf16 = y_plain.ptr(), .residual = residual.f32(), .sum = sum_plain.f32()});
  dev.be.rmsnorm_forward({.rows = rows, .dim = dim, .weight = w.f32(), .rstd = rstd.f32(), .y_bf16 = y.ptr(),
                          .residual = residual.f32(), .sum = sum.f32(), .x_bf16 = x16.ptr()});
  CHECK(same_bits(sum.to_host_f32(), sum_plain.to_host_f32()));
  CHECK(same_bits(rstd.to_host_f32(), rstd_plain.to_host_f32()));
  CHECK(y.bits() == y_plain.bits());
}

TEST_CASE("bf16 rest: the block's add reading a bfloat16 output equals the fp32 add of its values") {
  testing::StrictDevice dev;
  const size_t n = 333;
  const Representable out(n, 41, 5.0);
  const mt::Buffer x = dev.upload(testing::random_floats(n, 42)), y_plain = dev.upload(out.values), y = dev.floats(n);
  Bf16Values y16(dev, n);
  y16.set(out.bits);
  dev.be.add({.n = n, .x = x.f32(), .y = y_plain.f32()});
  dev.be.add({.n = n, .x = x.f32(), .y = y.f32(), .y_bf16 = y16.ptr()});
  CHECK(same_bits(y.to_host_f32(), y_plain.to_host_f32()));
}

TEST_CASE("bf16 rest: SwiGLU's backward reading a bfloat16 hidden gradient equals its fp32 arithmetic") {
  testing::StrictDevice dev;
  const size_t n = 500;
  const Representable dh(n, 51, 0.5);
  const mt::Buffer gate = dev.upload(testing::random_floats(n, 52, 3.0));
  const mt::Buffer up = dev.upload(testing::random_floats(n, 53));
  const mt::Buffer dh32 = dev.upload(dh.values);
  const mt::Buffer dg = dev.floats(n), du = dev.floats(n), dg_plain = dev.floats(n), du_plain = dev.floats(n);
  Bf16Values dh16(dev, n);
  dh16.set(dh.bits);
  dev.be.swiglu_backward(
      {.n = n, .gate = gate.f32(), .up = up.f32(), .dh = dh32.f32(), .dgate = dg_plain.f32(), .dup = du_plain.f32()});
  dev.be.swiglu_backward(
      {.n = n, .gate = gate.f32(), .up = up.f32(), .dgate = dg.f32(), .dup = du.f32(), .dh_bf16 = dh16.ptr()});
  CHECK(same_bits(dg.to_host_f32(), dg_plain.to_host_f32()));
  CHECK(same_bits(du.to_host_f32(), du_plain.to_host_f32()));
}

TEST_CASE("bf16 rest: a Dgrad GEMM writing bfloat16 stores its fp32 sums rounded once") {
  testing::StrictDevice dev;
  const int rows = 9, in = 24, out = 17;
  const mt::Buffer dy = dev.upload(testing::random_floats(size_t(rows) * out, 61));
  const mt::Buffer w = dev.upload(testing::random_floats(size_t(out) * in, 62, 0.3));
  const mt::Buffer dx = dev.floats(size_t(rows) * in);
  Bf16Values dx16(dev, size_t(rows) * in);
  mt::LayerEnv env;
  env.backend = &dev.be;
  env.gemm_inputs = mt::GemmPrecision::bf16;
  env.linear_backward_input(dy.f32(), w.f32(), rows, in, out, dx.f32());
  env.linear_backward_input(dy.f32(), w.f32(), rows, in, out, dx16.ptr());
  const std::vector<float> fp32 = dx.to_host_f32();
  std::vector<uint16_t> rounded(fp32.size());
  for (size_t i = 0; i < fp32.size(); ++i) rounded[i] = mt::float_to_bf16_bits(fp32[i]);
  CHECK(dx16.bits() == rounded);
}
