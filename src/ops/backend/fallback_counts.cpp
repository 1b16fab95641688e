#include "ops/backend/fallback_counts.hpp"

#include <algorithm>
#include <sstream>

#include "util/error.hpp"

namespace mt {

namespace {

const char* kind_name(FallbackKind kind) { return kind == FallbackKind::gemm ? "gemm" : "fp8"; }

const char* what_ran(FallbackKind kind) {
  return kind == FallbackKind::gemm ? "through cublasGemmEx (cuBLASLt found no algorithm)"
                                    : "as fp32 over dequantized values";
}

}  // namespace

void FallbackCounts::add(FallbackKind kind, int m, int n, int k, long long calls) {
  counts_[{kind, m, n, k}] += calls;
}

void FallbackCounts::merge(const FallbackCounts& other) {
  for (const auto& [key, calls] : other.counts_) counts_[key] += calls;
}

long long FallbackCounts::calls(FallbackKind kind) const {
  long long total = 0;
  for (const auto& [key, calls] : counts_) total += std::get<0>(key) == kind ? calls : 0;
  return total;
}

std::string FallbackCounts::line(FallbackKind kind) const {
  struct Shape {
    int m, n, k;
    long long calls;
  };
  std::vector<Shape> shapes;
  for (const auto& [key, calls] : counts_)
    if (std::get<0>(key) == kind) shapes.push_back({std::get<1>(key), std::get<2>(key), std::get<3>(key), calls});
  std::string out = std::string(kind_name(kind)) + " fallback: ";
  if (shapes.empty()) return out + "none";
  // The map's order (by shape) breaks ties, so the line is the same run after run.
  std::stable_sort(shapes.begin(), shapes.end(), [](const Shape& a, const Shape& b) { return a.calls > b.calls; });
  const long long total = calls(kind);
  out += std::to_string(total) + (total == 1 ? " call " : " calls ") + what_ran(kind) + ":";
  const size_t listed = std::min(shapes.size(), size_t(kShapesListed));
  for (size_t i = 0; i < listed; ++i)
    out += (i ? ", " : " ") + std::to_string(shapes[i].m) + "x" + std::to_string(shapes[i].n) + "x" +
           std::to_string(shapes[i].k) + " (" + std::to_string(shapes[i].calls) + ")";
  if (shapes.size() > listed) out += ", and " + std::to_string(shapes.size() - listed) + " more shapes";
  return out;
}

std::vector<std::string> FallbackCounts::counted_lines() const {
  std::vector<std::string> out;
  for (FallbackKind kind : kFallbackKinds)
    if (calls(kind) > 0) out.push_back(line(kind));
  return out;
}

std::string FallbackCounts::serialize() const {
  std::string out;
  for (const auto& [key, calls] : counts_)
    out += std::string(kind_name(std::get<0>(key))) + " " + std::to_string(std::get<1>(key)) + " " +
           std::to_string(std::get<2>(key)) + " " + std::to_string(std::get<3>(key)) + " " + std::to_string(calls) +
           "\n";
  return out;
}

FallbackCounts FallbackCounts::parse(const std::string& text) {
  FallbackCounts counts;
  std::istringstream in(text);
  std::string kind;
  int m = 0, n = 0, k = 0;
  long long calls = 0;
  while (in >> kind >> m >> n >> k >> calls) {
    MT_CHECK(kind == "gemm" || kind == "fp8");
    counts.add(kind == "gemm" ? FallbackKind::gemm : FallbackKind::fp8, m, n, k, calls);
  }
  MT_CHECK(in.eof());
  return counts;
}

FallbackCounts backend_fallbacks(const Backend& b) {
  const FallbackCounts* counts = b.ops->fallbacks ? b.ops->fallbacks(b.state) : nullptr;
  return counts ? *counts : FallbackCounts{};
}

}  // namespace mt
