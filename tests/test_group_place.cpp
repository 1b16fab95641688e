// group_place (src/ops/grouped_gemm/group_place.hpp), the arithmetic by which the CUDA grouped GEMM
// places each group from the device offsets, against group_gemms, the split the CPU reference runs;
// and the FP8 scale offsets against quantizing each expert on its own.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "ops/fp8/quantize_cpu.hpp"
#include "ops/grouped_gemm/group_place.hpp"
#include "ops/grouped_gemm/groups.hpp"

namespace {

using mt::GroupedGemmArgs;
using mt::Ragged;

// Empty groups first, inside and last.
const std::vector<int> kOffsets{0, 0, 5, 5, 12, 13, 13};

// Every group's place against the GEMM group_gemms makes for it: the same extent and operands.
void check_places(GroupedGemmArgs a) {
  const std::vector<float> x(1000), y(1000);
  std::vector<float> out(1000);
  a.offsets = kOffsets.data(), a.a = x.data(), a.b = y.data(), a.c = out.data();
  const std::vector<mt::GemmArgs> list = mt::group_gemms(a);
  size_t next = 0;
  for (int g = 0; g < a.groups; ++g) {
    const int begin = kOffsets[g], rows = kOffsets[g + 1] - begin;
    const mt::GroupPlace p = mt::group_place(a.ragged, a.m, a.n, a.k, g, begin, rows);
    CAPTURE(g);
    if (rows == 0) {
      CHECK(p.m * p.n * p.k == 0);
      if (a.ragged == Ragged::reduce) CHECK((p.m == 0 && p.n == 0 && p.k == 0));
      continue;
    }
    REQUIRE(next < list.size());
    const mt::GemmArgs& one = list[next++];
    CHECK(p.m == one.m);
    CHECK(p.n == one.n);
    CHECK(p.k == one.k);
    CHECK(p.a == size_t(one.a - a.a));
    CHECK(p.b == size_t(one.b - a.b));
    CHECK(p.c == size_t(one.c - a.c));
  }
  CHECK(next == list.size());
}

}  // namespace

TEST_CASE("group_place: the rows form places each group as group_gemms does, empty groups with no rows") {
  for (bool trans_b : {true, false})
    check_places({.groups = 6, .ragged = Ragged::rows, .m = 13, .n = 7, .k = 3, .trans_b = trans_b});
}

TEST_CASE("group_place: the reduce form (K = the group's rows), an empty group with an empty extent") {
  check_places({.groups = 6, .ragged = Ragged::reduce, .m = 4, .n = 6, .k = 13, .beta = 1.0f});
}

TEST_CASE("group_place: FP8 scale offsets: one quantization of the stacked operands is every group's own") {
  const mt::Fp8Recipe r;  // 1 x 128 activation pieces, 128 x 128 weight blocks
  const int groups = 3, n = 256, k = 300, rows = 9;
  std::vector<float> w(size_t(groups) * n * k), x(size_t(rows) * k);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37f * float(i)) * float(1 + i % 977);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.11f * float(i)) * float(1 + i % 313);
  const auto pieces_w = mt::cpu::fp8_pieces(r, mt::Fp8Operand::weight, false, n, k);
  const auto pieces_x = mt::cpu::fp8_pieces(r, mt::Fp8Operand::activation, false, rows, k);
  const mt::cpu::Fp8Matrix all_w = mt::cpu::fp8_quantize(w.data(), groups * n, k, pieces_w, r.forward, true);
  const mt::cpu::Fp8Matrix all_x = mt::cpu::fp8_quantize(x.data(), rows, k, pieces_x, r.forward, true);
  for (int g = 0; g < groups; ++g) {
    const mt::cpu::Fp8Matrix own = mt::cpu::fp8_quantize(w.data() + size_t(g) * n * k, n, k, pieces_w, r.forward, true);
    const size_t at = mt::group_weight_scales(n, k, r.block, g);
    CAPTURE(g);
    REQUIRE(at + own.scales.size() <= all_w.scales.size());
    CHECK(std::vector<float>(all_w.scales.begin() + long(at), all_w.scales.begin() + long(at + own.scales.size())) ==
          own.scales);
  }
  // Rows 4..8 as one group starting at row 4.
  const mt::cpu::Fp8Matrix tail = mt::cpu::fp8_quantize(x.data() + 4 * k, rows - 4, k, pieces_x, r.forward, true);
  const size_t at = mt::group_activation_scales(k, r.tile, 4);
  CHECK(std::vector<float>(all_x.scales.begin() + long(at), all_x.scales.end()) == tail.scales);
}
