#pragma once
// What the GPU parity checks share: deterministic inputs, the error measure, the report, and
// device copies of host vectors (outputs poisoned before each GPU call, so an element a kernel
// never writes fails its check).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/ops.hpp"

namespace parity {

// Deterministic uniform numbers; each check seeds its own generator.
struct Lcg {
  uint64_t state;
  explicit Lcg(uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t bits() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 24;
  }
  // In [lo, hi).
  float next(float lo, float hi) { return lo + (hi - lo) * float(double(bits() >> 16) / double(1ull << 24)); }
  // In [0, n).
  int below(int n) { return int(bits() % uint64_t(n)); }
};

inline std::vector<float> random_values(size_t n, Lcg& rng, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.next(lo, hi);
  return v;
}

// max |got - want| / max |want|; NaN anywhere counts as infinitely wrong.
template <class T>
double relative_error(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(double(got[i]) - double(want[i]));
    if (std::isnan(d)) return INFINITY;
    diff = std::max(diff, d);
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

struct Report {
  int passed = 0, failed = 0;
  void check(const std::string& name, double err, double tol) {
    const bool ok = err < tol || (tol == 0 && err == 0);
    std::printf("%s %s err=%.3g (tol %.0e)\n", ok ? "PASS" : "FAIL", name.c_str(), err, tol);
    (ok ? passed : failed)++;
  }
  // A check the backend under test cannot take: said, not counted.
  void skip(const std::string& name, const std::string& why) {
    std::printf("SKIP %s (%s)\n", name.c_str(), why.c_str());
  }
};

// What every group of checks runs with: the report, the CPU reference, the backend under test, and
// whether that is the CUDA backend (else the strict CPU backend standing in for it).
struct Context {
  Report& rep;
  const mt::Backend& cpu;
  const mt::Backend& gpu;
  bool cuda;
};

// A device copy of a host vector, `offset` elements into its allocation (unaligned sub-views).
template <class T>
class DeviceVec {
 public:
  DeviceVec(const mt::Backend& be, const std::vector<T>& host, size_t offset = 0)
      : be_(be), n_(host.size()), base_(static_cast<T*>(be.alloc((host.size() + offset) * sizeof(T)))),
        p_(base_ + offset) {
    be_.upload(p_, host.data(), n_ * sizeof(T));
  }
  ~DeviceVec() { be_.release(base_); }
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;
  T* get() const { return p_; }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    be_.synchronize();
    be_.download(v.data(), p_, n_ * sizeof(T));
    return v;
  }

 private:
  const mt::Backend& be_;
  size_t n_;
  T* base_;
  T* p_;
};

// Output poison: NaN for floats, a value no index takes for integers.
template <class T>
std::vector<T> poison(size_t n) {
  if constexpr (std::is_floating_point_v<T>) return std::vector<T>(n, T(NAN));
  else return std::vector<T>(n, T(-7777777));
}

// Groups of checks (gpu_parity's --only names), each from its own first seed.
// The MoE and optimizer ops (tests/gpu/parity_moe.cpp):
void group_routing(const Context& c, uint64_t seed);       // sigmoid, selection, grouping, balance, bias
void group_moe_rows(const Context& c, uint64_t seed);      // gathers and the gated combine
void group_grouped_gemm(const Context& c, uint64_t seed);  // the experts' GEMMs
// The grouped GEMM on CUTLASS, BF16 and FP8 (tests/gpu/parity_grouped.cpp).
void group_grouped_cutlass(const Context& c, uint64_t seed);
void group_optimizer(const Context& c, uint64_t seed);     // sum of squares, scale, AdamW, copy, zero
void group_muon(const Context& c, uint64_t seed);  // Muon's momentum, update, Newton-Schulz (parity_muon.cpp)
void group_shift_tokens(const Context& c, uint64_t seed);  // MTP's shift
void group_fp8_rows(const Context& c, uint64_t seed);      // FP8 row packing
// Strided GEMMs, attention over strided and grouped heads, grouped copies (tests/gpu/parity_strided.cpp).
void group_strided(const Context& c, uint64_t seed);
// The FP8 GEMM (tests/gpu/parity_fp8.cpp): the CUDA quantizer on its own (CUDA only), and the GEMM.
void group_fp8_quantize(const Context& c, uint64_t seed);
void group_fp8_gemm(const Context& c, uint64_t seed);
// RMSNorm and SwiGLU writing FP8 codes with their outputs (tests/gpu/parity_fp8_fused.cpp).
void group_fp8_fused(const Context& c, uint64_t seed);
// Attention on cuDNN's fused attention and on the own kernels (tests/gpu/parity_cudnn.cpp).
void group_attention_cudnn(const Context& c, uint64_t seed);
// GEMMs writing bfloat16 and SwiGLU, RoPE and the residual adds reading it (tests/gpu/parity_bf16_outputs.cpp).
void group_bf16_outputs(const Context& c, uint64_t seed);

}  // namespace parity
