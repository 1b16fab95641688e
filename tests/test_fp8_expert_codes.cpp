// FP8 codes of the routed experts' GEMM inputs written by their producers (ops/fp8/row_codes.hpp):
// the grouped GEMM reads the rows' codes (GroupedGemmArgs::fp8_a) in place of quantizing them, with
// the same products bit for bit, whatever the rows per expert; and the experts' SwiGLU writes the
// codes of its product (for the down projection) and of its gradients (for the gate's and up's
// Dgrad), so that the experts train the same bits with fp8.fused_codes on and off.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "fp8_codes_check.hpp"
#include "model/grouped_experts.hpp"

using namespace fp8_test;

namespace {

// Rows per expert: empty experts first, between and last.
const std::vector<int> kOffsets{0, 0, 5, 5, 6, 19, 19};
constexpr int kGroups = 6, kRows = 19, kBound = 23;

mt::Buffer device_ints(const testing::StrictDevice& dev, const std::vector<int>& host) {
  mt::Buffer b(dev.be, mt::DType::i32, host.size());
  b.upload(host.data(), host.size());
  return b;
}

// x's codes as its producer writes them (fp8_code_rows on the host), uploaded into room.
void write_codes(const std::vector<float>& x, int rows, int cols, const CodesRoom& room) {
  std::vector<uint8_t> codes(room.codes.count());
  std::vector<float> scales(room.scales.count());
  mt::Fp8RowCodes q = room.q;
  q.codes = codes.data();
  q.scales = scales.data();
  mt::fp8_code_rows(x.data(), rows, cols, q);
  room.codes.upload(codes.data(), codes.size());
  room.scales.from_host(scales);
}

struct ExpertsRun {
  std::vector<float> y, dx, dgate, dup, ddown;
  bool product_codes = false;
  int quantized_rows = 0;  // the grouped GEMMs over rows that quantized their rows themselves
};

int& quantized_rows() {
  static int n = 0;
  return n;
}
const mt::OpTable*& grouped_table() {
  static const mt::OpTable* t = nullptr;
  return t;
}
void counting_grouped_gemm(mt::DeviceState* s, const mt::GroupedGemmArgs& g) {
  if (g.ragged == mt::Ragged::rows && !g.fp8_a.codes) ++quantized_rows();
  grouped_table()->grouped_gemm(s, g);
}

// The experts forward and backward under fp8 inputs, their producers writing codes or not.
ExpertsRun run_experts(const mt::Fp8Recipe& r, bool fused_codes) {
  constexpr int dim = 40, hidden = 136;
  testing::StrictDevice dev;
  const mt::Buffer offsets = device_ints(dev, kOffsets);
  const mt::Buffer x = dev.upload(testing::random_floats(size_t(kBound) * dim, 61));
  const mt::Buffer wg = dev.upload(testing::random_floats(size_t(kGroups) * hidden * dim, 62, 0.3));
  const mt::Buffer wu = dev.upload(testing::random_floats(size_t(kGroups) * hidden * dim, 63, 0.3));
  const mt::Buffer wd = dev.upload(testing::random_floats(size_t(kGroups) * dim * hidden, 64, 0.3));
  const mt::Buffer dy = dev.upload(wide_floats(size_t(kBound) * dim, 65));
  const mt::Buffer y = dev.floats(size_t(kBound) * dim), dx = dev.floats(size_t(kBound) * dim);
  const mt::Buffer dwg = dev.floats(wg.count()), dwu = dev.floats(wu.count()), dwd = dev.floats(wd.count());
  mt::OpTable table = *dev.be.ops;
  grouped_table() = dev.be.ops;
  table.grouped_gemm = counting_grouped_gemm;
  mt::Backend counted = dev.be;
  counted.ops = &table;
  quantized_rows() = 0;
  mt::LayerEnv env;
  env.backend = &counted;
  env.gemm_inputs = mt::GemmPrecision::fp8;
  env.fp8 = &r;
  env.fp8_fused_codes = fused_codes;
  mt::Arena arena(dev.be);
  const mt::GroupedExpertWeights w{wg.f32(), wu.f32(), wd.f32(), kGroups, dim, hidden};
  mt::GroupedExpertsSaved saved;
  mt::grouped_experts_forward(env, arena, arena, w, {offsets.i32(), kRows, kBound}, x.f32(), y.f32(), saved);
  mt::grouped_experts_backward_input(env, arena, w, dy.f32(), dx.f32(), saved);
  mt::grouped_experts_backward_weight(env, w, {dwg.f32(), dwu.f32(), dwd.f32()}, saved);
  auto routed = [](const mt::Buffer& b) {
    std::vector<float> v = b.to_host_f32();
    v.resize(size_t(kRows) * dim);
    return v;
  };
  return {routed(y), routed(dx), dwg.to_host_f32(), dwu.to_host_f32(), dwd.to_host_f32(),
          saved.h.fp8.codes != nullptr, quantized_rows()};
}

}  // namespace

TEST_CASE("fp8 expert codes: the grouped GEMM reads the rows' codes in place of quantizing them, bit for bit") {
  const int k = 200, n = 48;
  for (const mt::Fp8Recipe& r : recipes())
    for (mt::Fp8Operand kind : {mt::Fp8Operand::activation, mt::Fp8Operand::gradient}) {
      CAPTURE(int(r.forward));
      CAPTURE(r.pow2_scales);
      CAPTURE(r.tile);
      CAPTURE(int(kind));
      testing::StrictDevice dev;
      const mt::Buffer offsets = device_ints(dev, kOffsets);
      const std::vector<float> x = wide_floats(size_t(kRows) * k, 51);
      const mt::Buffer xs = dev.upload(x);
      // The forward reads W_g [n, k] (x W^T), Dgrad W_g [k, n] (dy W): the same stored size.
      const mt::Buffer w = dev.upload(testing::random_floats(size_t(kGroups) * n * k, 52, 0.3));
      const mt::Buffer plain = dev.floats(size_t(kRows) * n), fused = dev.floats(size_t(kRows) * n);
      CodesRoom room(dev, kRows, k, r, kind);
      write_codes(x, kRows, k, room);
      const bool forward = kind == mt::Fp8Operand::activation;
      mt::GroupedGemmArgs g{.groups = kGroups, .offsets = offsets.i32(), .ragged = mt::Ragged::rows, .m = kRows,
                            .n = n, .k = k, .a = xs.f32(), .b = w.f32(), .trans_b = forward, .c = plain.f32(),
                            .inputs = mt::GemmPrecision::fp8, .fp8 = {&r, kind, mt::Fp8Operand::weight}};
      dev.be.grouped_gemm(g);
      // The fp32 rows NaN: a call that quantized them again would show it.
      const mt::Buffer nan = dev.upload(std::vector<float>(x.size(), std::numeric_limits<float>::quiet_NaN()));
      g.fp8_a = room.operand();
      g.a = nan.f32();
      g.c = fused.f32();
      dev.be.grouped_gemm(g);
      CHECK(same_bits(plain.to_host_f32(), fused.to_host_f32()));
    }
}

TEST_CASE("fp8 expert codes: the experts' SwiGLU writes the codes their GEMMs read, the same bits as without") {
  for (const mt::Fp8Recipe& r : recipes()) {
    CAPTURE(int(r.forward));
    CAPTURE(r.pow2_scales);
    CAPTURE(r.tile);
    const ExpertsRun fused = run_experts(r, true), plain = run_experts(r, false);
    CHECK(fused.product_codes);
    CHECK_FALSE(plain.product_codes);
    // Of the gate, up and down forward and their three Dgrads, only the gate's and up's forward (the
    // dispatched rows) and the down projection's Dgrad (the combine's gradient) still quantize their rows.
    CHECK(fused.quantized_rows == 3);
    CHECK(plain.quantized_rows == 6);
    using Values = std::vector<float> ExpertsRun::*;
    for (Values v : {&ExpertsRun::y, &ExpertsRun::dx, &ExpertsRun::dgate, &ExpertsRun::dup, &ExpertsRun::ddown})
      CHECK(same_bits(fused.*v, plain.*v));
  }
}
