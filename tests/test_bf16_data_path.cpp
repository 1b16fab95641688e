// The bfloat16 data path under bf16 GEMMs: a GEMM writing bfloat16 (GemmArgs::c_bf16) stores its
// fp32 product rounded once, bit for bit; SwiGLU reading bfloat16 gate and up (both passes) computes
// what it computes from the same values in fp32; a dense FFN under bf16_outputs keeps its gate and
// up outputs so (and writes its hidden gradient so), with the results of the fp32-output ops fed
// the rounded values; and the planner's
// storage model (Storage::mixed_bf16_outputs) counts the arenas one step of it fills.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "model/layer_env.hpp"
#include "model/model.hpp"
#include "model/swiglu_ffn.hpp"
#include "ops/bf16.hpp"
#include "plan/cluster.hpp"
#include "plan/cost_model.hpp"
#include "test_helpers.hpp"
#include "train/accumulate.hpp"

namespace {

// n bfloat16 values of device memory.
struct Bf16Buffer {
  mt::Buffer bytes;
  Bf16Buffer(const testing::StrictDevice& dev, size_t n) : bytes(dev.be, mt::DType::u8, 2 * n) {}
  mt::Bf16* ptr() const { return static_cast<mt::Bf16*>(bytes.raw()); }
  std::vector<uint16_t> bits() const {
    std::vector<uint16_t> out(bytes.count() / 2);
    bytes.download(out.data(), bytes.count());
    return out;
  }
  void set(const std::vector<uint16_t>& b) const { bytes.upload(b.data(), 2 * b.size()); }
};

std::vector<uint16_t> rounded_bits(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = mt::float_to_bf16_bits(x[i]);
  return out;
}

std::vector<float> widened(const std::vector<uint16_t>& b) {
  std::vector<float> out(b.size());
  for (size_t i = 0; i < b.size(); ++i) out[i] = mt::bf16_bits_to_float(b[i]);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct GemmCase {
  int m, n, k;
  bool trans_a, trans_b;
  int ldc_extra, batch;
};

}  // namespace

TEST_CASE("bf16 data path: a GEMM writing bfloat16 stores the fp32 product rounded once, bit for bit") {
  const GemmCase cases[] = {{5, 7, 9, false, true, 0, 1}, {16, 33, 20, true, false, 3, 1},
                            {3, 4, 130, false, false, 0, 3}, {1, 1, 1, true, true, 2, 2}};
  for (const GemmCase& t : cases) {
    CAPTURE(t.m);
    CAPTURE(t.n);
    CAPTURE(t.k);
    CAPTURE(t.batch);
    testing::StrictDevice dev;
    const int ldc = t.n + t.ldc_extra;
    const long long batch_c = (long long)t.m * ldc;
    const size_t na = size_t(t.m) * t.k * t.batch, nb = size_t(t.k) * t.n * t.batch, nc = size_t(batch_c) * t.batch;
    const mt::Buffer a = dev.upload(testing::random_floats(na, 1)), b = dev.upload(testing::random_floats(nb, 2));
    // 1e30 between the rows: a store past the row's n columns would show.
    const mt::Buffer c = dev.upload(std::vector<float>(nc, 1e30f));
    Bf16Buffer c16(dev, nc);
    c16.set(std::vector<uint16_t>(nc, 0x7f00));
    mt::GemmArgs g{.m = t.m, .n = t.n, .k = t.k, .a = a.f32(), .trans_a = t.trans_a, .b = b.f32(),
                   .trans_b = t.trans_b, .c = c.f32(), .inputs = mt::GemmPrecision::bf16, .ldc = ldc,
                   .batch = t.batch, .batch_a = (long long)t.m * t.k, .batch_b = (long long)t.k * t.n,
                   .batch_c = batch_c};
    dev.be.gemm(g);
    g.c = nullptr;
    g.c_bf16 = c16.ptr();
    dev.be.gemm(g);
    const std::vector<float> fp32 = c.to_host_f32();
    const std::vector<uint16_t> got = c16.bits();
    for (size_t i = 0; i < nc; ++i) {
      const bool in_row = int(i % size_t(batch_c) % size_t(ldc)) < t.n;
      CHECK(got[i] == (in_row ? mt::float_to_bf16_bits(fp32[i]) : uint16_t(0x7f00)));
    }
  }
}

TEST_CASE("bf16 data path: SwiGLU reading bfloat16 gate and up equals its fp32 arithmetic on their values") {
  testing::StrictDevice dev;
  const size_t n = 1000;
  const std::vector<uint16_t> gate_bits = rounded_bits(testing::random_floats(n, 5, 4.0));
  const std::vector<uint16_t> up_bits = rounded_bits(testing::random_floats(n, 6, 4.0));
  Bf16Buffer gate16(dev, n), up16(dev, n), h16(dev, n), h16_plain(dev, n);
  gate16.set(gate_bits);
  up16.set(up_bits);
  const mt::Buffer gate = dev.upload(widened(gate_bits)), up = dev.upload(widened(up_bits));
  const mt::Buffer h = dev.floats(n), h_plain = dev.floats(n);
  dev.be.swiglu_forward({.n = n, .gate = gate.f32(), .up = up.f32(), .h = h_plain.f32()});
  dev.be.swiglu_forward({.n = n, .h = h.f32(), .gate_bf16 = gate16.ptr(), .up_bf16 = up16.ptr()});
  CHECK(same_bits(h.to_host_f32(), h_plain.to_host_f32()));
  dev.be.swiglu_forward({.n = n, .gate = gate.f32(), .up = up.f32(), .h_bf16 = h16_plain.ptr()});
  dev.be.swiglu_forward({.n = n, .h_bf16 = h16.ptr(), .gate_bf16 = gate16.ptr(), .up_bf16 = up16.ptr()});
  CHECK(h16.bits() == h16_plain.bits());

  const mt::Buffer dh = dev.upload(testing::random_floats(n, 7));
  const mt::Buffer dg = dev.floats(n), du = dev.floats(n), dg_plain = dev.floats(n), du_plain = dev.floats(n);
  dev.be.swiglu_backward(
      {.n = n, .gate = gate.f32(), .up = up.f32(), .dh = dh.f32(), .dgate = dg_plain.f32(), .dup = du_plain.f32()});
  dev.be.swiglu_backward({.n = n, .dh = dh.f32(), .dgate = dg.f32(), .dup = du.f32(), .gate_bf16 = gate16.ptr(),
                          .up_bf16 = up16.ptr()});
  CHECK(same_bits(dg.to_host_f32(), dg_plain.to_host_f32()));
  CHECK(same_bits(du.to_host_f32(), du_plain.to_host_f32()));
}

namespace {

// A dense FFN's output and input gradient, and its gate output as kept for the backward.
struct FfnResult {
  std::vector<float> y, dx;
  std::vector<uint16_t> gate_bits;
  bool gate_fp32_kept = false;
};

struct FfnInputs {
  static constexpr int rows = 6, dim = 40, hidden = 24;
  testing::StrictDevice dev;
  mt::Buffer x = dev.upload(testing::random_floats(size_t(rows) * dim, 11));
  mt::Buffer wg = dev.upload(testing::random_floats(size_t(hidden) * dim, 12, 0.3));
  mt::Buffer wu = dev.upload(testing::random_floats(size_t(hidden) * dim, 13, 0.3));
  mt::Buffer wd = dev.upload(testing::random_floats(size_t(dim) * hidden, 14, 0.3));
  mt::Buffer dy = dev.upload(testing::random_floats(size_t(rows) * dim, 15));
  mt::Buffer y = dev.floats(size_t(rows) * dim), dx = dev.floats(size_t(rows) * dim);
  mt::GemmArgs linear(const float* in, const float* w, int n_in, int n_out, float* out) const {
    return {.m = rows, .n = n_out, .k = n_in, .a = in, .b = w, .trans_b = true, .c = out,
            .inputs = mt::GemmPrecision::bf16};
  }
};

// The FFN through swiglu_forward and swiglu_backward_input with bf16_outputs.
FfnResult ffn_layers(FfnInputs& in) {
  mt::LayerEnv env;
  env.backend = &in.dev.be;
  env.gemm_inputs = mt::GemmPrecision::bf16;
  env.bf16_activations = true;
  env.bf16_outputs = true;
  mt::Arena arena(in.dev.be);
  const mt::SwigluWeights w{in.wg.f32(), in.wu.f32(), in.wd.f32(), in.dim, in.hidden};
  mt::SwigluSaved saved;
  mt::swiglu_forward(env, arena, arena, w, in.x.f32(), in.rows, in.y.f32(), false, saved);
  mt::swiglu_backward_input(env, arena, w, in.dy.f32(), in.dx.f32(), false, saved);
  FfnResult r{in.y.to_host_f32(), in.dx.to_host_f32(), {}, saved.a != nullptr};
  r.gate_bits.resize(size_t(in.rows) * in.hidden);
  in.dev.be.download(r.gate_bits.data(), saved.a_bf16, 2 * r.gate_bits.size());
  return r;
}

// The same from fp32-output ops: the gate and up products rounded on the host, then SwiGLU on them.
FfnResult ffn_ops(FfnInputs& in) {
  const auto& be = in.dev.be;
  const size_t nh = size_t(in.rows) * in.hidden;
  const mt::Buffer a = in.dev.floats(nh), b = in.dev.floats(nh), dh = in.dev.floats(nh);
  be.gemm(in.linear(in.x.f32(), in.wg.f32(), in.dim, in.hidden, a.f32()));
  be.gemm(in.linear(in.x.f32(), in.wu.f32(), in.dim, in.hidden, b.f32()));
  FfnResult r;
  r.gate_bits = rounded_bits(a.to_host_f32());
  a.from_host(widened(r.gate_bits));
  b.from_host(widened(rounded_bits(b.to_host_f32())));
  Bf16Buffer h(in.dev, nh);
  be.swiglu_forward({.n = nh, .gate = a.f32(), .up = b.f32(), .h_bf16 = h.ptr()});
  be.gemm({.m = in.rows, .n = in.dim, .k = in.hidden, .b = in.wd.f32(), .trans_b = true, .c = in.y.f32(),
           .inputs = mt::GemmPrecision::bf16, .a_bf16 = h.ptr()});
  be.gemm({.m = in.rows, .n = in.hidden, .k = in.dim, .a = in.dy.f32(), .b = in.wd.f32(), .c = dh.f32(),
           .inputs = mt::GemmPrecision::bf16});
  dh.from_host(widened(rounded_bits(dh.to_host_f32())));  // the hidden gradient as its Dgrad stores it
  const mt::Buffer dg = in.dev.floats(nh), du = in.dev.floats(nh);
  be.swiglu_backward({.n = nh, .gate = a.f32(), .up = b.f32(), .dh = dh.f32(), .dgate = dg.f32(), .dup = du.f32()});
  be.gemm({.m = in.rows, .n = in.dim, .k = in.hidden, .a = dg.f32(), .b = in.wg.f32(), .c = in.dx.f32(),
           .inputs = mt::GemmPrecision::bf16});
  be.gemm({.m = in.rows, .n = in.dim, .k = in.hidden, .a = du.f32(), .b = in.wu.f32(), .c = in.dx.f32(),
           .beta = 1.0f, .inputs = mt::GemmPrecision::bf16});
  r.y = in.y.to_host_f32();
  r.dx = in.dx.to_host_f32();
  return r;
}

}  // namespace

TEST_CASE("bf16 data path: a dense FFN keeps its gate and up outputs in bfloat16, with the rounded ops' results") {
  FfnInputs first, second;
  const FfnResult layers = ffn_layers(first), ops = ffn_ops(second);
  CHECK_FALSE(layers.gate_fp32_kept);
  CHECK(layers.gate_bits == ops.gate_bits);
  CHECK(same_bits(layers.y, ops.y));
  CHECK(same_bits(layers.dx, ops.dx));
}

TEST_CASE("bf16 data path: the planner's mixed_bf16_outputs storage equals one step's arenas, below mixed's") {
  const mt::plan::Cluster cluster = mt::plan::load_cluster("configs/clusters/h100-superpod.toml");
  mt::MatmulSetup matmul(mt::GemmPrecision::bf16);
  matmul.bf16_activations = matmul.bf16_outputs = true;
  for (auto [name, cfg] : testing::attention_variants())
    for (mt::Recompute recompute : {mt::Recompute::none, mt::Recompute::selective}) {
      cfg.seq_len = 64;  // enough rows that the arenas' 64-byte rounding of each tensor is noise
      cfg.n_dense_layers = 1;
      CAPTURE(name);
      const std::string mode = mt::name_of(recompute);
      CAPTURE(mode);
      testing::StrictDevice dev;
      mt::Model model(cfg, 7, dev.be, matmul, 1);
      model.set_recompute(recompute);
      const std::vector<int> tokens = testing::random_tokens(size_t(2) * cfg.seq_len, cfg.vocab_size, 5);
      mt::accumulate_gradients(model, 2, 2, [&](int, std::vector<int>& in, std::vector<int>& tg) {
        in = tokens;
        tg = tokens;
      });
      mt::plan::Layout l;
      l.zero = 0;
      l.micro_batch = 2;
      l.recompute = recompute;
      l.storage = mt::plan::Storage::mixed_bf16_outputs;
      const double planned = mt::plan::estimate_step(cfg, 2, cluster, l).memory.activations;
      CHECK(planned == doctest::Approx(double(model.arena_high_water())).epsilon(0.02));
      l.storage = mt::plan::Storage::mixed;
      CHECK(mt::plan::estimate_step(cfg, 2, cluster, l).memory.activations > planned);
    }
}

namespace {

// n random values rounded to bfloat16: their bits and the same values in fp32.
struct Representable {
  std::vector<uint16_t> bits;
  std::vector<float> values;
  Representable(size_t n, uint64_t seed, double scale = 1.0)
      : bits(rounded_bits(testing::random_floats(n, seed, scale))), values(widened(bits)) {}
};

}  // namespace

// The rest of the path: RoPE reading bfloat16, the residual adds (RMSNorm's fused add and the
// block's add) reading a bfloat16 projection output, SwiGLU's backward reading a bfloat16 hidden
// gradient and a Dgrad GEMM writing it, each equal to its fp32 version fed the same values.

TEST_CASE("bf16 data path: RoPE reading bfloat16 writes what it writes from the same values in fp32") {
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
    Bf16Buffer in(dev, n), out(dev, n), out_plain(dev, n);
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

TEST_CASE("bf16 data path: RMSNorm's residual add reading a bfloat16 output equals the fp32 add of its values") {
  testing::StrictDevice dev;
  const int rows = 7, dim = 40;
  const size_t n = size_t(rows) * dim;
  const Representable out(n, 31, 2.0);
  const mt::Buffer residual = dev.upload(testing::random_floats(n, 32));
  const mt::Buffer w = dev.upload(testing::random_floats(dim, 33));
  const mt::Buffer x32 = dev.upload(out.values), sum = dev.floats(n), sum_plain = dev.floats(n);
  const mt::Buffer rstd = dev.floats(rows), rstd_plain = dev.floats(rows);
  Bf16Buffer x16(dev, n), y(dev, n), y_plain(dev, n);
  x16.set(out.bits);
  dev.be.rmsnorm_forward({.rows = rows, .dim = dim, .x = x32.f32(), .weight = w.f32(), .rstd = rstd_plain.f32(),
                          .y_bf16 = y_plain.ptr(), .residual = residual.f32(), .sum = sum_plain.f32()});
  dev.be.rmsnorm_forward({.rows = rows, .dim = dim, .weight = w.f32(), .rstd = rstd.f32(), .y_bf16 = y.ptr(),
                          .residual = residual.f32(), .sum = sum.f32(), .x_bf16 = x16.ptr()});
  CHECK(same_bits(sum.to_host_f32(), sum_plain.to_host_f32()));
  CHECK(same_bits(rstd.to_host_f32(), rstd_plain.to_host_f32()));
  CHECK(y.bits() == y_plain.bits());
}

TEST_CASE("bf16 data path: the block's add reading a bfloat16 output equals the fp32 add of its values") {
  testing::StrictDevice dev;
  const size_t n = 333;
  const Representable out(n, 41, 5.0);
  const mt::Buffer x = dev.upload(testing::random_floats(n, 42)), y_plain = dev.upload(out.values), y = dev.floats(n);
  Bf16Buffer y16(dev, n);
  y16.set(out.bits);
  dev.be.add({.n = n, .x = x.f32(), .y = y_plain.f32()});
  dev.be.add({.n = n, .x = x.f32(), .y = y.f32(), .y_bf16 = y16.ptr()});
  CHECK(same_bits(y.to_host_f32(), y_plain.to_host_f32()));
}

TEST_CASE("bf16 data path: SwiGLU's backward reading a bfloat16 hidden gradient equals its fp32 arithmetic") {
  testing::StrictDevice dev;
  const size_t n = 500;
  const Representable dh(n, 51, 0.5);
  const mt::Buffer gate = dev.upload(testing::random_floats(n, 52, 3.0));
  const mt::Buffer up = dev.upload(testing::random_floats(n, 53));
  const mt::Buffer dh32 = dev.upload(dh.values);
  const mt::Buffer dg = dev.floats(n), du = dev.floats(n), dg_plain = dev.floats(n), du_plain = dev.floats(n);
  Bf16Buffer dh16(dev, n);
  dh16.set(dh.bits);
  dev.be.swiglu_backward(
      {.n = n, .gate = gate.f32(), .up = up.f32(), .dh = dh32.f32(), .dgate = dg_plain.f32(), .dup = du_plain.f32()});
  dev.be.swiglu_backward(
      {.n = n, .gate = gate.f32(), .up = up.f32(), .dgate = dg.f32(), .dup = du.f32(), .dh_bf16 = dh16.ptr()});
  CHECK(same_bits(dg.to_host_f32(), dg_plain.to_host_f32()));
  CHECK(same_bits(du.to_host_f32(), du_plain.to_host_f32()));
}

TEST_CASE("bf16 data path: a Dgrad GEMM writing bfloat16 stores its fp32 sums rounded once") {
  testing::StrictDevice dev;
  const int rows = 9, in = 24, out = 17;
  const mt::Buffer dy = dev.upload(testing::random_floats(size_t(rows) * out, 61));
  const mt::Buffer w = dev.upload(testing::random_floats(size_t(out) * in, 62, 0.3));
  const mt::Buffer dx = dev.floats(size_t(rows) * in);
  Bf16Buffer dx16(dev, size_t(rows) * in);
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
