// FallbackCounts: GEMMs that ran another way than their first choice, counted by kind and shape,
// and the lines runs and benchmarks end with.
#include <doctest/doctest.h>

#include <string>

#include "ops/backend/fallback_counts.hpp"
#include "ops/backend/op_profile.hpp"

using mt::FallbackCounts;
using mt::FallbackKind;

TEST_CASE("fallback counts: nothing counted says none") {
  const FallbackCounts counts;
  CHECK(counts.empty());
  CHECK(counts.calls(FallbackKind::gemm) == 0);
  CHECK(counts.line(FallbackKind::gemm) == "gemm fallback: none");
  CHECK(counts.line(FallbackKind::fp8) == "fp8 fallback: none");
  CHECK(counts.counted_lines().empty());
}

TEST_CASE("fallback counts: one line per kind, shapes by calls, then by shape") {
  FallbackCounts counts;
  for (int i = 0; i < 600; ++i) counts.add(FallbackKind::fp8, 4096, 2048, 5632);
  counts.add(FallbackKind::fp8, 4096, 2048, 2048, 600);
  counts.add(FallbackKind::fp8, 3, 5, 7, 601);
  counts.add(FallbackKind::gemm, 7, 13, 5);
  CHECK(counts.calls(FallbackKind::fp8) == 1801);
  CHECK(counts.calls(FallbackKind::gemm) == 1);
  CHECK(counts.line(FallbackKind::fp8) ==
        "fp8 fallback: 1801 calls as fp32 over dequantized values: 3x5x7 (601), 4096x2048x2048 (600), "
        "4096x2048x5632 (600)");
  CHECK(counts.line(FallbackKind::gemm) ==
        "gemm fallback: 1 call through cublasGemmEx (cuBLASLt found no algorithm): 7x13x5 (1)");
  const auto lines = counts.counted_lines();
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].rfind("gemm fallback: ", 0) == 0);
  CHECK(lines[1].rfind("fp8 fallback: ", 0) == 0);
}

TEST_CASE("fallback counts: a kind that counted nothing has no line of its own") {
  FallbackCounts counts;
  counts.add(FallbackKind::fp8, 1, 2, 3);
  const auto lines = counts.counted_lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "fp8 fallback: 1 call as fp32 over dequantized values: 1x2x3 (1)");
}

TEST_CASE("fallback counts: many shapes are cut after the most frequent") {
  FallbackCounts counts;
  for (int s = 1; s <= FallbackCounts::kShapesListed + 3; ++s) counts.add(FallbackKind::gemm, s, 1, 1, s);
  const std::string line = counts.line(FallbackKind::gemm);
  const int top = FallbackCounts::kShapesListed + 3;
  CHECK(line.find(": " + std::to_string(top) + "x1x1 (" + std::to_string(top) + "), ") != std::string::npos);
  CHECK(line.find(", and 3 more shapes") != std::string::npos);
  CHECK(line.find(" 1x1x1 (1)") == std::string::npos);
}

TEST_CASE("fallback counts: merged, and carried as text between ranks") {
  FallbackCounts a, b;
  a.add(FallbackKind::gemm, 1, 1, 1, 2);
  a.add(FallbackKind::fp8, 256, 384, 512, 5);
  b.add(FallbackKind::gemm, 1, 1, 1, 3);
  b.add(FallbackKind::gemm, 70001, 3, 129280, 1);
  FallbackCounts sum = FallbackCounts::parse(a.serialize());
  sum.merge(FallbackCounts::parse(b.serialize()));
  CHECK(sum.calls(FallbackKind::gemm) == 6);
  CHECK(sum.calls(FallbackKind::fp8) == 5);
  CHECK(sum.line(FallbackKind::gemm) ==
        "gemm fallback: 6 calls through cublasGemmEx (cuBLASLt found no algorithm): 1x1x1 (5), 70001x3x129280 (1)");
  CHECK(FallbackCounts::parse(FallbackCounts{}.serialize()).empty());
}

TEST_CASE("fallback counts: CPU backends, profiled or not, have none") {
  CHECK(mt::backend_fallbacks(mt::cpu_backend()).empty());
  mt::Backend strict = mt::cpu_strict_backend_create();
  CHECK(mt::backend_fallbacks(strict).empty());
  {
    mt::OpProfile profile(strict);
    CHECK(!profile.backend().ops->fallbacks);
    CHECK(mt::backend_fallbacks(profile.backend()).empty());
  }
  mt::cpu_strict_backend_destroy(strict);
}

TEST_CASE("fallback counts: read through the op table, and through a profiling backend") {
  // A CPU table with a fallbacks entry, its state standing for a device's counts.
  FallbackCounts counts;
  counts.add(FallbackKind::gemm, 7, 13, 5, 4);
  mt::OpTable table = mt::cpu_ops();
  table.fallbacks = [](mt::DeviceState* s) { return reinterpret_cast<const FallbackCounts*>(s); };
  const mt::Backend device{&table, reinterpret_cast<mt::DeviceState*>(&counts)};
  CHECK(mt::backend_fallbacks(device).calls(FallbackKind::gemm) == 4);
  mt::OpProfile profile(device);
  CHECK(mt::backend_fallbacks(profile.backend()).line(FallbackKind::gemm) == counts.line(FallbackKind::gemm));
  counts.add(FallbackKind::fp8, 1, 1, 1);
  CHECK(mt::backend_fallbacks(profile.backend()).calls(FallbackKind::fp8) == 1);
}
