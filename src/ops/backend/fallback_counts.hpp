#pragma once
// GEMMs a backend ran another way than its first choice, counted by kind and shape, so that a
// run or a benchmark can say what it measured. Host-side; one per CUDA backend state (the CPU
// backends have one path and count nothing).
//   gemm: cuBLASLt's heuristic found no algorithm for an fp32 or bf16 GEMM; cublasGemmEx ran it
//   fp8:  an FP8 GEMM cuBLASLt cannot run in FP8 ran as fp32 over the dequantized values
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "ops/ops.hpp"

namespace mt {

enum class FallbackKind { gemm, fp8 };
inline constexpr FallbackKind kFallbackKinds[] = {FallbackKind::gemm, FallbackKind::fp8};

class FallbackCounts {
 public:
  // `calls` more GEMMs of `kind`, shaped as GemmArgs: C[m, n], the sum over k.
  void add(FallbackKind kind, int m, int n, int k, long long calls = 1);
  void merge(const FallbackCounts& other);
  long long calls(FallbackKind kind) const;
  bool empty() const { return counts_.empty(); }

  // One line per kind, e.g. "fp8 fallback: 1200 calls as fp32 over dequantized values: 4096x2048x2048
  // (600), 4096x2048x5632 (600)" (MxNxK, most calls first, at most kShapesListed shapes), or
  // "fp8 fallback: none".
  std::string line(FallbackKind kind) const;
  // The lines of the kinds that counted something (none when nothing fell back).
  std::vector<std::string> counted_lines() const;

  // A plain-text form ("kind m n k calls" lines) to carry counts between ranks; parse() takes it back.
  std::string serialize() const;
  static FallbackCounts parse(const std::string& text);

  static constexpr int kShapesListed = 8;

 private:
  std::map<std::tuple<FallbackKind, int, int, int>, long long> counts_;
};

// What `b`'s GEMMs ran besides their first choice; empty for a backend without such counts.
FallbackCounts backend_fallbacks(const Backend& b);

}  // namespace mt
