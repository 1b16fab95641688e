// GPU parity of the grouped GEMM on CUTLASS (src/ops/grouped_gemm/cuda_cutlass_*.cu): BF16 in its three
// forms and the FP8 forward under DeepSeek-V3's recipe, ragged groups with empty ones, against the CPU
// reference and against the CUDA per-group path. On CUDA each call must also have run on CUTLASS
// (on Hopper with CUTLASS in the build), so a silent fallback fails instead of passing as parity.
#include <string>

#include "ops/grouped_gemm/cuda_paths.hpp"
#include "parity.hpp"

namespace parity {

namespace {

using mt::GemmPrecision;
using mt::GroupedGemmArgs;
using mt::Ragged;

// Group sizes with empty groups first, inside and last, sizes around the 128-row tile and a single row.
const std::vector<int> kRows{0, 130, 0, 1, 257, 64, 300, 0};

std::vector<int> offsets_of(const std::vector<int>& rows) {
  std::vector<int> off{0};
  for (int r : rows) off.push_back(off.back() + r);
  return off;
}

struct Case {
  Ragged ragged;
  bool trans_b;
  GemmPrecision inputs;
  float beta;
  const char* form;
};

// The FP8 forward again, reading the experts' weights as prepared after an update (fp8_b, made by the
// backend's fp8_quantize_weight): the codes and scales the call would make, so the bits of `unprepared`.
// b is then NaN, so a call that quantizes the weights again instead fails.
void check_prepared(const Context& c, GroupedGemmArgs g, const std::vector<float>& c0,
                    const std::vector<float>& unprepared, const std::string& name) {
  const mt::Fp8WeightLayout l = mt::fp8_weight_layout(*g.fp8.recipe, g.n, g.k, false);
  DeviceVec<uint8_t> codes(c.gpu, std::vector<uint8_t>(size_t(g.groups) * l.codes()));
  DeviceVec<float> scales(c.gpu, std::vector<float>(size_t(g.groups) * l.pieces()));
  c.gpu.fp8_quantize_weight({.recipe = g.fp8.recipe, .x = g.b, .groups = g.groups, .rows = g.n, .cols = g.k,
                             .codes = codes.get(), .scales = scales.get()});
  g.fp8_b = {codes.get(), scales.get(), l.k_pad, false, l.codes(), l.pieces()};
  DeviceVec<float> nan_b(c.gpu, poison<float>(size_t(g.groups) * g.n * g.k));
  g.b = nan_b.get();
  DeviceVec<float> got(c.gpu, g.beta == 0 ? poison<float>(c0.size()) : c0);
  g.c = got.get();
  if (c.cuda) {
    const std::string path = mt::cuda_grouped_gemm_path(c.gpu, g);
    c.rep.check(name + " with prepared weights runs on cutlass-fp8 (runs on " + path + ")",
                path == "cutlass-fp8" ? 0 : 1, 0);
  }
  c.gpu.grouped_gemm(g);
  c.rep.check(name + " with prepared weights, against quantizing them in the call",
              relative_error(got.download(), unprepared), 0);
}

// One grouped GEMM on the CPU and both CUDA paths; n and k as GroupedGemmArgs (for reduce, m = k here).
void check_case(const Context& c, const Case& cs, int n, int k, uint64_t seed) {
  Lcg rng(seed);
  const std::vector<int> off = offsets_of(kRows);
  const int groups = int(kRows.size()), rows = off.back();
  const bool by_rows = cs.ragged == Ragged::rows;
  const size_t a_count = size_t(rows) * k, b_count = by_rows ? size_t(groups) * n * k : size_t(rows) * n;
  const size_t c_count = by_rows ? size_t(rows) * n : size_t(groups) * k * n;
  const std::vector<float> a = random_values(a_count, rng), b = random_values(b_count, rng);
  const std::vector<float> c0 = random_values(c_count, rng);
  static const mt::Fp8Recipe recipe;  // DeepSeek-V3's: e4m3, 1 x 128 and 128 x 128, power-of-two scales
  GroupedGemmArgs g{.groups = groups, .ragged = cs.ragged, .n = n, .trans_b = cs.trans_b, .beta = cs.beta,
                    .inputs = cs.inputs, .fp8 = {.recipe = &recipe}};
  if (by_rows) g.m = rows, g.k = k;
  else g.m = k, g.k = rows;
  std::vector<float> want = c0;
  g.offsets = off.data(), g.a = a.data(), g.b = b.data(), g.c = want.data();
  c.cpu.grouped_gemm(g);

  const std::string name = std::string("grouped_gemm ") + cs.form + (cs.beta != 0 ? " beta=1" : "") + " n=" +
                           std::to_string(n) + " k=" + std::to_string(k) + " groups=" + std::to_string(groups);
  DeviceVec<int> d_off(c.gpu, off);
  DeviceVec<float> d_a(c.gpu, a), d_b(c.gpu, b);
  DeviceVec<float> got(c.gpu, cs.beta == 0 ? poison<float>(c_count) : c0);
  g.offsets = d_off.get(), g.a = d_a.get(), g.b = d_b.get(), g.c = got.get();
  const double tol = cs.inputs == GemmPrecision::fp8 ? 1e-3 : 1e-4;
  if (c.cuda) {
    const std::string path = mt::cuda_grouped_gemm_path(c.gpu, g);
    const std::string want_path = cs.inputs == GemmPrecision::fp8 ? "cutlass-fp8" : "cutlass-bf16";
    c.rep.check(name + " runs on " + want_path + " (runs on " + path + ")", path == want_path ? 0 : 1, 0);
  }
  c.gpu.grouped_gemm(g);
  c.rep.check(name + " against the CPU", relative_error(got.download(), want), tol);
  if (cs.inputs == GemmPrecision::fp8) check_prepared(c, g, c0, got.download(), name);
  if (!c.cuda) return;
  DeviceVec<float> loop(c.gpu, cs.beta == 0 ? poison<float>(c_count) : c0);
  g.c = loop.get();
  mt::cuda_grouped_gemm_per_group(c.gpu, g);
  c.rep.check(name + " against the per-group path", relative_error(got.download(), loop.download()), tol);
}

}  // namespace

void group_grouped_cutlass(const Context& c, uint64_t seed) {
  const Case cases[] = {
      {Ragged::rows, true, GemmPrecision::bf16, 0.0f, "bf16 forward"},
      {Ragged::rows, true, GemmPrecision::bf16, 1.0f, "bf16 forward"},
      {Ragged::rows, false, GemmPrecision::bf16, 0.0f, "bf16 dgrad"},
      {Ragged::rows, false, GemmPrecision::bf16, 1.0f, "bf16 dgrad"},
      {Ragged::reduce, false, GemmPrecision::bf16, 1.0f, "bf16 wgrad"},
      {Ragged::rows, true, GemmPrecision::fp8, 0.0f, "fp8 forward"},
      {Ragged::rows, true, GemmPrecision::fp8, 1.0f, "fp8 forward"},
  };
  // A K that is no multiple of the tiles (bf16 64, fp8 128) but of 16 bytes, and MoE-like widths.
  for (const Case& cs : cases) check_case(c, cs, 256, 208, seed++);
  for (const Case& cs : cases) check_case(c, cs, 384, 512, seed++);
}

}  // namespace parity
