// GemmArgs with inputs == fp8 on the GPU: both operands quantized by the call's recipe
// (ops/fp8/quantize_cuda.cu, the CPU emulation's codes and scales bit for bit), or B's codes and
// scales prepared once per update (GemmArgs::fp8_b, the same bits) and A's written by the op that
// produced it (GemmArgs::fp8_a, the same bits: only cuBLASLt's scale layout is made here), then one scaled FP8
// cuBLASLt matmul with fp32 output. The result is sum_k (q_a s_a)(q_b s_b) * alpha + beta C like
// the CPU's, the sum in the tensor cores' order and precision.
//
// What cuBLASLt (13.1 headers, sm_90) offers and how the recipe maps onto it:
//   - FP8 runs only in the "TN" form, both operands K-contiguous, K and the leading dimensions
//     multiples of 16 bytes, and (block scaling) M and N multiples of 4. Every operand is
//     therefore requantized into a K-contiguous, padded copy: the forward's x W^T needs no
//     transpose, Dgrad's W and both Wgrad operands (K = tokens) are transposed while quantizing.
//     Outputs whose shape or address do not fit go through a padded fp32 buffer.
//   - CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F ("a dedicated CUDA_R_32F scaling factor for each
//     128-element block in the innermost dimension") takes 1 x 128 tiles along K, and any piece
//     whose K extent is a multiple of 128 by repeating its scale;
//     CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F ("for each 128x128-element block") takes weight
//     blocks of 128 (or multiples). BLK x BLK is not supported, so when both operands are
//     weights one of them goes as VEC128 (each row repeats its block's scale: the same values).
//   - per_tensor uses CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F with the scales as device
//     pointers, so alpha stays the caller's and nothing is read back to the host.
//   - E5M2 x E5M2 is not among the FP8 type combinations; E4M3 x E5M2 either way is.
// What cuBLASLt cannot run (tiles or blocks that cut a 128-element run along K, E5M2 x E5M2, or
// no algorithm from the heuristic) runs as an fp32 GEMM over dequantized copies fp8(x/s)*s:
// the same values the CPU multiplies, at fp32 speed. The backend counts every such call by shape
// (its fp8 fallbacks, which runs and benchmarks report) and notes the first on stderr.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/fp8/quantize_cuda.cuh"
#include "ops/gemm/cuda_lt.cuh"
#include "ops/backend/launch.cuh"
#include "ops/backend/cuda_backend.hpp"
#include "util/error.hpp"

namespace mt::cuda {

namespace {

constexpr size_t kAlign = 256;  // sub-buffers of a scratch slot start on cudaMalloc's alignment

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

struct Operand {
  Fp8View view;
  Fp8Scaling mode = Fp8Scaling::scalar;
  int outer_pad = 0;
  uint8_t* codes = nullptr;
  float* lt_scales = nullptr;     // what cuBLASLt reads
  float* piece_scales = nullptr;  // one per piece of the recipe
  bool prepared = false;          // codes and piece scales made ahead (GemmArgs::fp8_b)
};

cudaDataType_t lt_type(Fp8Format f) { return f == Fp8Format::e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

int32_t lt_mode(Fp8Scaling m) {
  switch (m) {
    case Fp8Scaling::vec128: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    case Fp8Scaling::blk128: return CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    case Fp8Scaling::scalar: break;
  }
  return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
}

// Picks each operand's scaling mode; returns why cuBLASLt cannot run the product, or nullptr.
const char* choose_modes(const Fp8Recipe& r, const GemmArgs& g, Operand& a, Operand& b) {
  if (a.view.format == Fp8Format::e5m2 && b.view.format == Fp8Format::e5m2)
    return "cuBLASLt has no E5M2 x E5M2 matmul";
  if (r.per_tensor) {
    a.mode = b.mode = Fp8Scaling::scalar;
    return nullptr;
  }
  auto pick = [](Operand& o, Fp8Operand kind) {
    if (kind == Fp8Operand::weight && fp8_expressible(o.view, Fp8Scaling::blk128)) o.mode = Fp8Scaling::blk128;
    else if (fp8_expressible(o.view, Fp8Scaling::vec128)) o.mode = Fp8Scaling::vec128;
    else return false;
    return true;
  };
  if (!pick(a, g.fp8.a) || !pick(b, g.fp8.b))
    return "cuBLASLt scales FP8 operands only per 128 elements along K (tile and block must be multiples of 128)";
  if (a.mode == Fp8Scaling::blk128 && b.mode == Fp8Scaling::blk128) a.mode = Fp8Scaling::vec128;
  return nullptr;
}

// One scratch slot holds an operand's codes, cuBLASLt scales and piece scales.
void place(DeviceState* s, ScratchSlot slot, Operand& o, int k_pad) {
  const size_t codes = aligned(size_t(o.outer_pad) * k_pad);
  const size_t lt = aligned(fp8_scale_count(o.view, o.mode, o.outer_pad) * sizeof(float));
  char* base = static_cast<char*>(scratch(s, slot, codes + lt + o.view.pieces() * sizeof(float)));
  o.codes = reinterpret_cast<uint8_t*>(base);
  o.piece_scales = reinterpret_cast<float*>(base + codes + lt);
  o.lt_scales = o.mode == Fp8Scaling::scalar ? o.piece_scales : reinterpret_cast<float*>(base + codes);
}

// Codes made ahead (a prepared weight's, or an activation's written by its producer) and their piece
// scales are their own; the slot holds only cuBLASLt's scales.
void place_prepared(DeviceState* s, ScratchSlot slot, Operand& o, const Fp8Codes& p, int k_pad) {
  MT_CHECK(p.ld == k_pad);
  o.prepared = true;
  o.codes = const_cast<uint8_t*>(p.codes);
  o.piece_scales = const_cast<float*>(p.scales);
  const size_t lt_bytes = fp8_scale_count(o.view, o.mode, o.outer_pad) * sizeof(float);
  o.lt_scales = o.mode == Fp8Scaling::scalar ? o.piece_scales : static_cast<float*>(scratch(s, slot, lt_bytes));
}

void quantize(DeviceState* s, const Operand& o, int k_pad) {
  if (!o.prepared) {
    fp8_piece_scales(s, o.view, o.piece_scales);
    fp8_quantize_codes(s, o.view, o.piece_scales, o.codes, o.outer_pad, k_pad);
  }
  if (o.mode != Fp8Scaling::scalar) fp8_cublas_scales(s, o.view, o.piece_scales, o.mode, o.outer_pad, o.lt_scales);
}

// Dequantized fp32 copies fp8(x/s)*s of both operands, in their own layouts (scratch slots A and B).
std::pair<const float*, const float*> dequantized_copies(DeviceState* s, const Fp8View& va, const Fp8View& vb) {
  auto copy = [&](ScratchSlot slot, const Fp8View& v) {
    const size_t values = aligned(size_t(v.outer) * v.k * sizeof(float));
    char* base = static_cast<char*>(scratch(s, slot, values + v.pieces() * sizeof(float)));
    auto* out = reinterpret_cast<float*>(base);
    auto* scales = reinterpret_cast<float*>(base + values);
    fp8_piece_scales(s, v, scales);
    fp8_dequantized_copy(s, v, scales, out);
    return static_cast<const float*>(out);
  };
  const float* a = copy(kScratchGemmA, va);
  return {a, copy(kScratchGemmB, vb)};
}

// The fp32 GEMM over the dequantized values: the same products the CPU takes, at fp32 speed.
// Counted per call; the first one also says why on stderr.
void gemm_dequantized(DeviceState* s, const GemmArgs& g, const Fp8View& va, const Fp8View& vb, const char* why) {
  if (s->fallbacks.calls(FallbackKind::fp8) == 0)
    std::fprintf(stderr, "moetrain: FP8 gemm m=%d n=%d k=%d runs as fp32 over the dequantized values (%s); each such "
                 "call is counted\n", g.m, g.n, g.k, why);
  s->fallbacks.add(FallbackKind::fp8, g.m, g.n, g.k);
  s->fp8_dequantized = true;
  const auto [a, b] = dequantized_copies(s, va, vb);
  gemm_lt(s, g, a, b, CUDA_R_32F);
}

// c[m, n] = d[m, ld] + beta c (d already holds alpha times the product).
__global__ void copy_out_kernel(const float* __restrict__ d, int ld, float* __restrict__ c, int m, int n, float beta) {
  const size_t total = size_t(m) * n, stride = size_t(gridDim.x) * blockDim.x;
  for (size_t t = size_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += stride) {
    const float v = d[(t / n) * ld + t % n];
    c[t] = beta == 0.0f ? v : v + beta * c[t];
  }
}

// One FP8 product as cuBLASLt runs it: the operands' places in scratch, the plan (descriptors and
// algorithm, kept in the device state's LtPlans), and where the output goes.
struct Fp8Matmul {
  Operand a, b;
  int k_pad = 0;
  bool direct = false;  // cuBLASLt writes g.c itself; else a padded buffer copied out
  float* d = nullptr;
  const LtPlan* plan = nullptr;
};

// The descriptors and algorithm of mm's product (operands placed, output chosen) into `plan`.
void build_fp8_plan(DeviceState* s, const Fp8Matmul& mm, LtPlan& plan) {
  const Operand& a = mm.a;
  const Operand& b = mm.b;
  // Column-major as in gemm_lt: D^T[n, m] = B[n, k] A[m, k]^T, i.e. cuBLASLt's A is our B (TRANSA = T
  // over its K-contiguous codes), its B our A (TRANSB = N), D row-major [m_pad, n_pad].
  LtCall& call = plan.call;
  MT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&call.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  MT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t));
  MT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n));
  // Modes stay at their default (scalar) unless block scaling is wanted: the docs forbid touching the others.
  if (b.mode != Fp8Scaling::scalar) {
    const int32_t mode = lt_mode(b.mode);
    MT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode));
  }
  if (a.mode != Fp8Scaling::scalar) {
    const int32_t mode = lt_mode(a.mode);
    MT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode));
  }
  const float* scale_first = b.lt_scales;
  const float* scale_second = a.lt_scales;
  MT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_first,
                                                 sizeof scale_first));
  MT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_second,
                                                 sizeof scale_second));
  MT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.first, lt_type(b.view.format), mm.k_pad, b.outer_pad, mm.k_pad));
  MT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.second, lt_type(a.view.format), mm.k_pad, a.outer_pad, mm.k_pad));
  MT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.out, CUDA_R_32F, b.outer_pad, a.outer_pad, b.outer_pad));

  MT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&call.pref));
  const uint64_t ws = s->workspace_bytes;
  MT_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  set_alignment(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, b.codes);
  set_alignment(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, a.codes);
  set_alignment(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, mm.d);
  set_alignment(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, mm.d);
  plan.found = find_algorithm(s, call, &plan.heur);
}

// Sets up g's FP8 matmul in `mm` (a and b hold their views); returns why cuBLASLt cannot run it,
// or nullptr. Quantizes nothing yet; the plan is built on the first product with its key.
const char* plan_matmul(DeviceState* s, const GemmArgs& g, Fp8Matmul& mm) {
  Operand& a = mm.a;
  Operand& b = mm.b;
  if (const char* why = choose_modes(*g.fp8.recipe, g, a, b)) return why;
  // Padded m and n also make the fp32 output rows 16-byte multiples.
  mm.k_pad = fp8_pad(g.k, kFp8PadK);
  a.outer_pad = fp8_pad(g.m, kFp8PadOuter);
  b.outer_pad = fp8_pad(g.n, kFp8PadOuter);
  if (g.fp8_a.codes) place_prepared(s, kScratchGemmA, a, g.fp8_a, mm.k_pad);
  else place(s, kScratchGemmA, a, mm.k_pad);
  if (g.fp8_b.codes) place_prepared(s, kScratchGemmB, b, g.fp8_b, mm.k_pad);
  else place(s, kScratchGemmB, b, mm.k_pad);
  mm.direct = a.outer_pad == g.m && b.outer_pad == g.n && alignment_of(g.c) >= 16;
  const size_t d_bytes = size_t(a.outer_pad) * b.outer_pad * sizeof(float);
  mm.d = mm.direct ? g.c : static_cast<float*>(scratch(s, kScratchGemmOut, d_bytes));
  const Fp8LtKey key{.type_a = int(lt_type(a.view.format)), .type_b = int(lt_type(b.view.format)),
                     .mode_a = int(a.mode), .mode_b = int(b.mode), .k_pad = mm.k_pad, .outer_a = a.outer_pad,
                     .outer_b = b.outer_pad, .scales_a = a.lt_scales, .scales_b = b.lt_scales,
                     .align_a = alignment_of(a.codes), .align_b = alignment_of(b.codes),
                     .align_d = alignment_of(mm.d), .workspace = s->workspace_bytes};
  std::unique_ptr<LtPlan>& plan = lt_plans(s).fp8_plans[key];
  if (!plan) {
    auto made = std::make_unique<LtPlan>();
    build_fp8_plan(s, mm, *made);
    plan = std::move(made);
  }
  mm.plan = plan.get();
  if (!mm.plan->found) return "no cuBLASLt FP8 algorithm for this shape and scaling";
  return nullptr;
}

// The matmul of a planned product whose operands are quantized, and the copy out of a padded output.
void run_matmul(DeviceState* s, const GemmArgs& g, const Fp8Matmul& mm) {
  // A padded output starts unwritten: cuBLASLt does not read C when beta is 0.
  const float beta = mm.direct ? g.beta : 0.0f;
  const LtCall& call = mm.plan->call;
  MT_CUBLAS_CHECK(cublasLtMatmul(s->lt, call.op, &g.alpha, mm.b.codes, call.first, mm.a.codes, call.second, &beta,
                                 mm.d, call.out, mm.d, call.out, &mm.plan->heur.algo, s->workspace,
                                 s->workspace_bytes, s->stream));
  if (!mm.direct) {
    copy_out_kernel<<<stride_grid(s, size_t(g.m) * g.n, kBlock), kBlock, 0, s->stream>>>(mm.d, mm.b.outer_pad, g.c,
                                                                                           g.m, g.n, g.beta);
    MT_CUDA_CHECK_LAUNCH();
  }
}

const char* scaling_name(Fp8Scaling m) {
  switch (m) {
    case Fp8Scaling::vec128: return "VEC128";
    case Fp8Scaling::blk128: return "BLK128x128";
    case Fp8Scaling::scalar: break;
  }
  return "SCALAR";
}

// What the backend reports as the last FP8 GEMM's scale modes (cuda_fp8_scaling_used).
void record_scaling(DeviceState* s, const Fp8Matmul& mm) {
  s->fp8_dequantized = false;
  s->fp8_scaling[0] = scaling_name(mm.a.mode);
  s->fp8_scaling[1] = scaling_name(mm.b.mode);
}

// Both operands as [outer, K]: A is [m, k] unless trans_a, B is [n, k] when trans_b.
void set_views(const GemmArgs& g, Fp8Matmul& mm) {
  const Fp8Recipe& r = *g.fp8.recipe;
  MT_CHECK(!g.fp8_b.codes || (g.fp8.b == Fp8Operand::weight && g.fp8_b.transposed == !g.trans_b));
  MT_CHECK(!g.fp8_a.codes || (g.fp8.a != Fp8Operand::weight && !g.trans_a && !r.per_tensor));
  mm.a.view = fp8_view(r, g.fp8.a, g.a, g.m, g.k, !g.trans_a);
  mm.b.view = fp8_view(r, g.fp8.b, g.b, g.n, g.k, g.trans_b);
}

}  // namespace

void gemm_fp8(DeviceState* s, const GemmArgs& g) {
  Fp8Matmul mm;
  set_views(g, mm);
  if (const char* why = plan_matmul(s, g, mm)) return gemm_dequantized(s, g, mm.a.view, mm.b.view, why);
  record_scaling(s, mm);
  quantize(s, mm.a, mm.k_pad);
  quantize(s, mm.b, mm.k_pad);
  run_matmul(s, g, mm);
}

}  // namespace mt::cuda

namespace mt {

std::function<void()> cuda_fp8_matmul_only(const Backend& gpu, const GemmArgs& g) {
  MT_CHECK(g.inputs == GemmPrecision::fp8 && g.m > 0 && g.n > 0 && g.k > 0);
  DeviceState* s = gpu.state;
  activate(s);
  // Shared with the returned call, which outlives this frame.
  const auto mm = std::make_shared<cuda::Fp8Matmul>();
  cuda::set_views(g, *mm);
  if (cuda::plan_matmul(s, g, *mm)) {
    s->fp8_dequantized = true;
    const std::pair<const float*, const float*> copies = cuda::dequantized_copies(s, mm->a.view, mm->b.view);
    return [s, g, copies] {
      activate(s);
      cuda::gemm_lt(s, g, copies.first, copies.second, CUDA_R_32F);
    };
  }
  cuda::record_scaling(s, *mm);
  cuda::quantize(s, mm->a, mm->k_pad);
  cuda::quantize(s, mm->b, mm->k_pad);
  return [s, g, mm] {
    activate(s);
    cuda::run_matmul(s, g, *mm);
  };
}

std::string cuda_fp8_scaling_used(const Backend& gpu) {
  const DeviceState* s = gpu.state;
  if (s->fp8_dequantized) return "fallback-fp32";
  if (!s->fp8_scaling[0]) return "none";
  return std::string(s->fp8_scaling[0]) + "/" + s->fp8_scaling[1];
}

}  // namespace mt
