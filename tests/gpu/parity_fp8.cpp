// GPU parity of the FP8 GEMM: the quantizer's codes and scales against the recipe's definition
// bit for bit, and the GEMM in its three training forms against the CPU backend's emulation with
// the same GemmArgs.
#include <algorithm>
#include <cstring>

#include "ops/backend/cuda_backend.hpp"
#include "ops/backend/fallback_counts.hpp"
#include "parity.hpp"

namespace parity {

namespace {

using mt::Fp8Format;
using mt::Fp8Operand;
using mt::Fp8Recipe;

// Tolerances relative to the largest expected value. Both sides multiply the same quantized
// values; what differs is the summation. cuBLASLt's FP8 kernels sum each 128-deep block in the
// tensor cores, whose accumulator keeps about 14 bits (DeepSeek-V3 report section 3.3.2), and
// promote to fp32 between blocks: a few 1e-4 of a block's partial sum at most, far below the
// O(1) errors a misplaced scale or code makes. A product with K below 128 is one block summed in
// the tensor cores alone, so its error is about 2^-14 (6.1e-5) of the largest value: the first H200
// run measured 2e-5..6.4e-5 at K = 3, 5, 7. The fp32 path over dequantized copies (recipes
// cuBLASLt cannot express) differs from the CPU in summation order only.
constexpr double kTensorCoreTol = 1e-3;
constexpr double kFp32Tol = 1e-5;

// Values whose magnitudes differ by up to 2^12 between rows and columns, so pieces get distinct
// scales, with one all-zero row (scale 1) and exact powers of two (amax exactly at a scale).
std::vector<float> spread_values(int rows, int cols, Lcg& rng) {
  std::vector<float> v(size_t(rows) * cols);
  std::vector<float> col_scale(cols);
  for (float& s : col_scale) s = std::ldexp(1.0f, rng.below(7) - 3);
  for (int r = 0; r < rows; ++r) {
    const float row_scale = std::ldexp(1.0f, rng.below(7) - 3);
    for (int c = 0; c < cols; ++c) {
      float& x = v[size_t(r) * cols + c];
      x = rng.below(16) == 0 ? std::ldexp(1.0f, rng.below(5)) : rng.next(-1.0f, 1.0f);
      x *= row_scale * col_scale[c];
    }
  }
  if (rows > 2)
    for (int c = 0; c < cols; ++c) v[size_t(rows / 2) * cols + c] = 0.0f;
  return v;
}

std::string recipe_name(const Fp8Recipe& r) {
  std::string s = r.gradient == Fp8Format::e5m2 ? "e4m3/e5m2" : "e4m3";
  s += r.per_tensor ? " per-tensor" : " tile=" + std::to_string(r.tile) + " block=" + std::to_string(r.block);
  s += r.pow2_scales ? " pow2" : " fp32-scales";
  return s;
}

// Whether cuBLASLt runs the product in FP8 (src/ops/gemm/cuda_fp8.cu); the others run in fp32.
// cuBLASLt scales per 128 elements along K, which expresses a piece whose K extent is a multiple of
// 128 or covers all of K (a tile of 64 is one piece when K <= 64).
bool tensor_core_product(const Fp8Recipe& r, const mt::GemmArgs& g) {
  if (r.format(g.fp8.a) == Fp8Format::e5m2 && r.format(g.fp8.b) == Fp8Format::e5m2) return false;
  auto along_k = [&](Fp8Operand kind) {
    const int piece_k = kind == Fp8Operand::weight ? r.block : r.tile;
    return piece_k % 128 == 0 || piece_k >= g.k;
  };
  return r.per_tensor || (along_k(g.fp8.a) && along_k(g.fp8.b));
}

// The recipe's quantization of x stored [rows, cols], done here from its definition (pieces of the
// stored matrix, s = fp8_scale(amax), code = fp8(x / s)), compared with what the GPU hands cuBLASLt.
void check_quantize(Report& rep, const mt::Backend& gpu, int rows, int cols, bool k_along_rows, Fp8Operand kind,
                    const Fp8Recipe& r, uint64_t seed) {
  Lcg rng(seed);
  const std::vector<float> x = spread_values(rows, cols, rng);
  int piece_rows = rows, piece_cols = cols;
  if (!r.per_tensor) {
    if (kind == Fp8Operand::weight) piece_rows = piece_cols = r.block;
    else if (k_along_rows) piece_rows = r.tile, piece_cols = 1;
    else piece_rows = 1, piece_cols = r.tile;
  }
  const Fp8Format format = r.format(kind);
  std::vector<uint8_t> codes(x.size());
  std::vector<float> scales(x.size());  // each element's piece scale
  for (int r0 = 0; r0 < rows; r0 += piece_rows)
    for (int c0 = 0; c0 < cols; c0 += piece_cols) {
      const int r1 = std::min(rows, r0 + piece_rows), c1 = std::min(cols, c0 + piece_cols);
      float amax = 0.0f;
      for (int i = r0; i < r1; ++i)
        for (int j = c0; j < c1; ++j) amax = std::max(amax, std::fabs(x[size_t(i) * cols + j]));
      const float s = mt::fp8_scale(amax, format, r.pow2_scales);
      for (int i = r0; i < r1; ++i)
        for (int j = c0; j < c1; ++j) {
          scales[size_t(i) * cols + j] = s;
          codes[size_t(i) * cols + j] = mt::float_to_fp8(x[size_t(i) * cols + j] / s, format);
        }
    }

  DeviceVec<float> dx(gpu, x);
  const mt::CudaFp8Operand q = mt::cuda_fp8_quantize(gpu, dx.get(), rows, cols, k_along_rows, kind, r);
  size_t wrong_codes = 0, wrong_scales = 0, wrong_padding = 0;
  const int pieces_k = (q.k + q.piece_k - 1) / q.piece_k;
  for (int i = 0; i < q.outer_pad; ++i)
    for (int k = 0; k < q.k_pad; ++k) {
      const uint8_t got = q.codes[size_t(i) * q.k_pad + k];
      if (i >= q.outer || k >= q.k) {
        wrong_padding += got != 0;
        continue;
      }
      const size_t stored = k_along_rows ? size_t(k) * cols + i : size_t(i) * cols + k;
      const float s = q.scales[size_t(i / q.piece_outer) * pieces_k + k / q.piece_k];
      wrong_codes += got != codes[stored];
      wrong_scales += std::memcmp(&s, &scales[stored], sizeof s) != 0;
    }
  char name[200];
  std::snprintf(name, sizeof name, "fp8 quantize %s rows=%d cols=%d K along %s %s: wrong codes/scales/padding",
                kind == Fp8Operand::weight ? "weight" : kind == Fp8Operand::gradient ? "gradient" : "activation", rows,
                cols, k_along_rows ? "rows" : "cols", recipe_name(r).c_str());
  rep.check(name, double(wrong_codes + wrong_scales + wrong_padding), 0);
}

enum class Form { forward, dgrad, wgrad };

// tokens x d_in -> d_out: forward y = x W^T, Dgrad dx = dy W, Wgrad dW = dy^T x (K = tokens).
void check_gemm(const Context& c, Form form, int tokens, int d_in, int d_out, const Fp8Recipe& r, float beta,
                size_t offset, uint64_t seed) {
  const mt::Backend &cpu = c.cpu, &gpu = c.gpu;
  Lcg rng(seed);
  mt::GemmArgs g;
  g.inputs = mt::GemmPrecision::fp8;
  g.alpha = 0.75f;
  g.beta = beta;
  g.fp8.recipe = &r;
  int a_rows = 0, a_cols = 0, b_rows = 0, b_cols = 0;
  const char* form_name = "";
  switch (form) {
    case Form::forward:  // x [tokens, d_in], W [d_out, d_in]
      g.m = tokens, g.n = d_out, g.k = d_in, g.trans_b = true;
      g.fp8.a = Fp8Operand::activation, g.fp8.b = Fp8Operand::weight;
      a_rows = tokens, a_cols = d_in, b_rows = d_out, b_cols = d_in, form_name = "forward";
      break;
    case Form::dgrad:  // dy [tokens, d_out], W [d_out, d_in]
      g.m = tokens, g.n = d_in, g.k = d_out;
      g.fp8.a = Fp8Operand::gradient, g.fp8.b = Fp8Operand::weight;
      a_rows = tokens, a_cols = d_out, b_rows = d_out, b_cols = d_in, form_name = "dgrad";
      break;
    case Form::wgrad:  // dy [tokens, d_out], x [tokens, d_in]
      g.m = d_out, g.n = d_in, g.k = tokens, g.trans_a = true;
      g.fp8.a = Fp8Operand::gradient, g.fp8.b = Fp8Operand::activation;
      a_rows = tokens, a_cols = d_out, b_rows = tokens, b_cols = d_in, form_name = "wgrad";
      break;
  }
  const std::vector<float> a = spread_values(a_rows, a_cols, rng), b = spread_values(b_rows, b_cols, rng);
  const size_t mn = size_t(g.m) * g.n;
  const std::vector<float> c0 = beta == 0 ? std::vector<float>(mn, 0.0f) : random_values(mn, rng);

  std::vector<float> want = c0;
  g.a = a.data(), g.b = b.data(), g.c = want.data();
  cpu.gemm(g);
  DeviceVec<float> da(gpu, a, offset), db(gpu, b, offset), dc(gpu, beta == 0 ? poison<float>(mn) : c0, offset);
  g.a = da.get(), g.b = db.get(), g.c = dc.get();
  const long long fallbacks = mt::backend_fallbacks(gpu).calls(mt::FallbackKind::fp8);
  gpu.gemm(g);
  const bool fell_back = mt::backend_fallbacks(gpu).calls(mt::FallbackKind::fp8) > fallbacks;
  const bool tensor_cores = tensor_core_product(r, g);

  char name[200];
  std::snprintf(name, sizeof name, "fp8 gemm %s tokens=%d d_in=%d d_out=%d %s beta=%g%s", form_name, tokens, d_in,
                d_out, recipe_name(r).c_str(), beta, offset ? " unaligned" : "");
  const double err = relative_error(dc.download(), want);
  if (c.cuda && fell_back == tensor_cores)  // the tolerance below would be the other path's
    c.rep.check(std::string(name) + (fell_back ? ": ran in fp32, FP8 expected" : ": ran in FP8, fp32 expected"),
                INFINITY, kFp32Tol);
  else
    c.rep.check(name, err, tensor_cores ? kTensorCoreTol : kFp32Tol);
}

// The recipes every group runs: DeepSeek's, fp32 scales, E5M2 gradients, per-tensor (two ways), and
// pieces cuBLASLt cannot scale (64) or scales by repeating (256).
std::vector<Fp8Recipe> recipes() {
  std::vector<Fp8Recipe> r(6);
  r[1].pow2_scales = false;
  r[2].gradient = Fp8Format::e5m2;
  r[3].per_tensor = true;
  r[4].per_tensor = true, r[4].pow2_scales = false, r[4].gradient = Fp8Format::e5m2;
  r[5].tile = 64, r[5].block = 64;  // cuBLASLt cannot scale these: fp32, but for K <= 64
  Fp8Recipe wide;  // pieces larger than cuBLASLt's: repeated scales
  wide.tile = 256, wide.block = 256;
  r.push_back(wide);
  return r;
}

}  // namespace

void group_fp8_quantize(const Context& c, uint64_t seed) {
  if (!c.cuda) {
    c.rep.skip("fp8 quantize", "the CUDA quantizer's own output; the stand-in has none");
    return;
  }
  // rows, cols, K along rows: a forward activation, a Wgrad operand (K = tokens down the columns),
  // weights read either way, a shape below every piece size.
  const struct { int rows, cols; bool k_along_rows; Fp8Operand kind; } shapes[] = {
      {200, 333, false, Fp8Operand::activation}, {333, 130, true, Fp8Operand::gradient},
      {333, 130, true, Fp8Operand::activation},  {300, 260, false, Fp8Operand::weight},
      {300, 260, true, Fp8Operand::weight},      {3, 5, false, Fp8Operand::gradient}};
  for (const Fp8Recipe& r : recipes())
    for (const auto& sh : shapes) check_quantize(c.rep, c.gpu, sh.rows, sh.cols, sh.k_along_rows, sh.kind, r, seed++);
}

void group_fp8_gemm(const Context& c, uint64_t seed) {
  const std::vector<Fp8Recipe> all = recipes();
  // tokens, d_in, d_out: multiples of 128, none, and fewer than one piece.
  const int shapes[][3] = {{256, 384, 512}, {200, 333, 130}, {3, 5, 7}};
  for (const Fp8Recipe& r : all)
    for (const auto& s : shapes)
      for (Form form : {Form::forward, Form::dgrad, Form::wgrad})
        for (float beta : {0.0f, form == Form::wgrad ? 1.0f : -0.5f})
          check_gemm(c, form, s[0], s[1], s[2], r, beta, 0, seed++);
  // Sub-views only 4-byte aligned: the output cannot be cuBLASLt's D and goes through a padded copy.
  for (Form form : {Form::forward, Form::dgrad, Form::wgrad})
    check_gemm(c, form, 256, 384, 512, all[0], -0.5f, 1, seed++);
}

}  // namespace parity
