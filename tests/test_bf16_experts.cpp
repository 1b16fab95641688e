// The routed experts under bf16_outputs: the grouped GEMM writing bfloat16 (GroupedGemmArgs::c_bf16)
// stores its fp32 product rounded once, bit for bit, whatever the rows per expert (none included);
// and the experts' grouped SwiGLU keeps its gate and up outputs so and computes, in both passes,
// exactly what each expert's dense FFN computes under the same setting (swiglu_ffn.hpp).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "model/grouped_experts.hpp"
#include "model/swiglu_ffn.hpp"
#include "ops/bf16.hpp"
#include "test_helpers.hpp"

namespace {

// n bfloat16 values of device memory, each set to `fill` bits.
struct Bf16Values {
  mt::Buffer bytes;
  Bf16Values(const testing::StrictDevice& dev, size_t n, uint16_t fill) : bytes(dev.be, mt::DType::u8, 2 * n) {
    const std::vector<uint16_t> host(n, fill);
    bytes.upload(host.data(), 2 * n);
  }
  mt::Bf16* ptr() const { return static_cast<mt::Bf16*>(bytes.raw()); }
  std::vector<uint16_t> bits() const {
    std::vector<uint16_t> out(bytes.count() / 2);
    bytes.download(out.data(), bytes.count());
    return out;
  }
};

mt::Buffer device_ints(const testing::StrictDevice& dev, const std::vector<int>& host) {
  mt::Buffer b(dev.be, mt::DType::i32, host.size());
  b.upload(host.data(), host.size());
  return b;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Rows per expert: empty experts first, between and last, so every edge of the ragged split shows.
const std::vector<int> kOffsets{0, 0, 5, 5, 6, 19, 19};
constexpr int kGroups = 6, kRows = 19, kBound = 23, kDim = 40, kHidden = 24;

}  // namespace

TEST_CASE("bf16 experts: the grouped GEMM writing bfloat16 stores the fp32 product rounded once, bit for bit") {
  testing::StrictDevice dev;
  const mt::Buffer offsets = device_ints(dev, kOffsets);
  const mt::Buffer x = dev.upload(testing::random_floats(size_t(kBound) * kDim, 21));
  const mt::Buffer w = dev.upload(testing::random_floats(size_t(kGroups) * kHidden * kDim, 22, 0.3));
  const mt::Buffer c = dev.floats(size_t(kBound) * kHidden);
  // Rows past the routed ones keep their fill: a store beyond the last group's rows would show.
  Bf16Values c16(dev, size_t(kBound) * kHidden, 0x7f00);
  mt::GroupedGemmArgs g{.groups = kGroups, .offsets = offsets.i32(), .ragged = mt::Ragged::rows, .m = kRows,
                        .n = kHidden, .k = kDim, .a = x.f32(), .b = w.f32(), .trans_b = true, .c = c.f32(),
                        .inputs = mt::GemmPrecision::bf16};
  dev.be.grouped_gemm(g);
  const std::vector<float> fp32 = c.to_host_f32();
  g.c_bf16 = c16.ptr();
  g.c = nullptr;
  dev.be.grouped_gemm(g);
  const std::vector<uint16_t> got = c16.bits();
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == (i < size_t(kRows) * kHidden ? mt::float_to_bf16_bits(fp32[i]) : uint16_t(0x7f00)));
  }
}

namespace {

// What the experts give: output, input gradient, weight gradients, and the gate output as kept.
struct ExpertsResult {
  std::vector<float> y, dx, dgate, dup, ddown;
  std::vector<uint16_t> gate_bits;
  bool gate_fp32_kept = false;
};

struct ExpertsInputs {
  testing::StrictDevice dev;
  mt::Buffer offsets = device_ints(dev, kOffsets);
  mt::Buffer x = dev.upload(testing::random_floats(size_t(kBound) * kDim, 31));
  mt::Buffer wg = dev.upload(testing::random_floats(size_t(kGroups) * kHidden * kDim, 32, 0.3));
  mt::Buffer wu = dev.upload(testing::random_floats(size_t(kGroups) * kHidden * kDim, 33, 0.3));
  mt::Buffer wd = dev.upload(testing::random_floats(size_t(kGroups) * kDim * kHidden, 34, 0.3));
  mt::Buffer dy = dev.upload(testing::random_floats(size_t(kBound) * kDim, 35));
  mt::Buffer y = dev.floats(size_t(kBound) * kDim), dx = dev.floats(size_t(kBound) * kDim);
  mt::Buffer dwg = dev.floats(size_t(kGroups) * kHidden * kDim), dwu = dev.floats(size_t(kGroups) * kHidden * kDim);
  mt::Buffer dwd = dev.floats(size_t(kGroups) * kDim * kHidden);
  mt::LayerEnv env() const {
    mt::LayerEnv e;
    e.backend = &dev.be;
    e.gemm_inputs = mt::GemmPrecision::bf16;
    e.bf16_activations = e.bf16_outputs = true;
    return e;
  }
  ExpertsResult result() const {
    return {y.to_host_f32(), dx.to_host_f32(), dwg.to_host_f32(), dwu.to_host_f32(), dwd.to_host_f32(), {}, false};
  }
};

// All the experts as one grouped SwiGLU (grouped_experts.hpp).
ExpertsResult grouped(ExpertsInputs& in) {
  const mt::LayerEnv env = in.env();
  mt::Arena arena(in.dev.be);
  const mt::GroupedExpertWeights w{in.wg.f32(), in.wu.f32(), in.wd.f32(), kGroups, kDim, kHidden};
  mt::GroupedExpertsSaved saved;
  const mt::ExpertRows rows{in.offsets.i32(), kRows, kBound};
  mt::grouped_experts_forward(env, arena, arena, w, rows, in.x.f32(), in.y.f32(), saved);
  mt::grouped_experts_backward_input(env, arena, w, in.dy.f32(), in.dx.f32(), saved);
  mt::grouped_experts_backward_weight(env, w, {in.dwg.f32(), in.dwu.f32(), in.dwd.f32()}, saved);
  ExpertsResult r = in.result();
  r.gate_fp32_kept = saved.a != nullptr;
  if (!saved.a_bf16) return r;
  r.gate_bits.resize(size_t(kRows) * kHidden);
  in.dev.be.download(r.gate_bits.data(), saved.a_bf16, 2 * r.gate_bits.size());
  return r;
}

// Each non-empty expert on its own rows as a dense FFN (swiglu_ffn.hpp).
ExpertsResult one_by_one(ExpertsInputs& in) {
  const mt::LayerEnv env = in.env();
  ExpertsResult r;
  for (int g = 0; g < kGroups; ++g) {
    const int begin = kOffsets[g], rows = kOffsets[g + 1] - begin;
    if (rows == 0) continue;
    const size_t wat = size_t(g) * kHidden * kDim, xat = size_t(begin) * kDim, hat = size_t(begin) * kHidden;
    mt::Arena arena(in.dev.be);
    const mt::SwigluWeights w{in.wg.f32() + wat, in.wu.f32() + wat, in.wd.f32() + wat, kDim, kHidden};
    mt::SwigluSaved saved;
    mt::swiglu_forward(env, arena, arena, w, in.x.f32() + xat, rows, in.y.f32() + xat, false, saved);
    mt::swiglu_backward_input(env, arena, w, in.dy.f32() + xat, in.dx.f32() + xat, false, saved);
    mt::swiglu_backward_weight(env, w, {in.dwg.f32() + wat, in.dwu.f32() + wat, in.dwd.f32() + wat}, saved);
    r.gate_bits.resize(hat + size_t(rows) * kHidden);
    in.dev.be.download(r.gate_bits.data() + hat, saved.a_bf16, 2 * size_t(rows) * kHidden);
  }
  const std::vector<uint16_t> gate_bits = r.gate_bits;
  r = in.result();
  r.gate_bits = gate_bits;
  return r;
}

}  // namespace

TEST_CASE("bf16 experts: the grouped SwiGLU keeps bfloat16 gate and up outputs and equals each expert's FFN") {
  ExpertsInputs grouped_in;
  ExpertsInputs each_in;
  const ExpertsResult each = one_by_one(each_in), all = grouped(grouped_in);
  CHECK(all.gate_bits == each.gate_bits);
  CHECK_FALSE(all.gate_fp32_kept);
  const size_t routed = size_t(kRows) * kDim;
  auto rows_of = [&](const std::vector<float>& v) { return std::vector<float>(v.begin(), v.begin() + routed); };
  CHECK(same_bits(rows_of(all.y), rows_of(each.y)));
  CHECK(same_bits(rows_of(all.dx), rows_of(each.dx)));
  CHECK(same_bits(all.dgate, each.dgate));
  CHECK(same_bits(all.dup, each.dup));
  CHECK(same_bits(all.ddown, each.ddown));
}
