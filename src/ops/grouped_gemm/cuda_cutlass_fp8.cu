// The FP8 grouped GEMM of the experts' forward (x W^T) through CUTLASS's Hopper kernel with blockwise
// scaling, as DeepSeek-V3 trains (report section 3.3): e4m3 codes, a scale per 1 x 128 piece of each
// activation row and per 128 x 128 block of each expert's weight, applied to the fp32 partial sums
// every 128 along K (no FP8 accumulation error beyond one 128-long run). The operands are quantized
// by ops/fp8/quantize_cuda.cu, bit for bit as the CPU emulation does: a row's pieces do not depend
// on its group, and with n a multiple of 128 the blocks of all experts stacked [groups * n, k] are
// each expert's own blocks, so one quantization of each whole operand serves every group. The weights'
// codes and scales made after the update (GroupedGemmArgs::fp8_b) are read in place of quantizing b, and
// the rows' codes their producer wrote (GroupedGemmArgs::fp8_a, the same bits) in place of quantizing a.
// Other recipes and forms (per-tensor scales, tiles other than 128, E5M2, the backward products)
// are not covered and run per group.
#include "ops/grouped_gemm/cuda_cutlass.cuh"

#include "util/error.hpp"

#if MT_CUTLASS
#include "ops/fp8/quantize_cuda.cuh"
#include "ops/grouped_gemm/cutlass_groups.cuh"
#include "ops/grouped_gemm/group_place.hpp"
#endif

namespace mt::cuda {

#if MT_CUTLASS

// Named, not anonymous: nvcc's launch stubs name a kernel's template arguments.
namespace fp8_groups {

using namespace cute;
namespace cg = cutlass_groups;
using E4m3 = cutlass::float_e4m3_t;

constexpr int kPiece = 128;  // the recipe's tile and block, which the scale layouts below fix
using Tile = Shape<_128, _128, _128>;
using Cluster = Shape<_1, _1, _1>;
// Scales K-major: row-major over [pieces_outer, pieces_k], as fp8_piece_scales writes them.
using ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<1, kPiece, kPiece, cute::GMMA::Major::K,
                                                              cute::GMMA::Major::K>;
using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());
using Epilogue = cg::Epilogue<Tile, Cluster>;
constexpr int kEpilogueBytes = static_cast<int>(sizeof(Epilogue::SharedStorage));
using Mainloop = cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, E4m3, cute::tuple<cutlass::layout::RowMajor*, LayoutSFA*>,
    16, E4m3, cute::tuple<cutlass::layout::ColumnMajor*, LayoutSFB*>, 16, float, Tile, Cluster,
    cutlass::gemm::collective::StageCountAutoCarveout<kEpilogueBytes>,
    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise>::CollectiveOp;
struct Forward {
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cg::ProblemShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};
using Gemm = Forward::Gemm;

// The per-group scale arrays, beside cg::Arrays.
struct Scales {
  const float** a;
  const float** b;
  LayoutSFA* layout_a;
  LayoutSFB* layout_b;
};

size_t scales_bytes(int groups) {
  return 2 * cg::aligned(groups * sizeof(void*)) + cg::aligned(groups * sizeof(LayoutSFA)) +
         cg::aligned(groups * sizeof(LayoutSFB));
}
Scales carve_scales(char* at, int groups) {
  Scales out{};
  out.a = reinterpret_cast<const float**>(at);
  out.b = reinterpret_cast<const float**>(at += cg::aligned(groups * sizeof(void*)));
  out.layout_a = reinterpret_cast<LayoutSFA*>(at += cg::aligned(groups * sizeof(void*)));
  out.layout_b = reinterpret_cast<LayoutSFB*>(at + cg::aligned(groups * sizeof(LayoutSFA)));
  return out;
}

// An operand's codes (`ld` a row) and the recipe's piece scales; for the weights, group g's start
// `group_codes` and `group_scales` after group 0's.
struct Quantized {
  const E4m3* codes;
  const float* scales;
  int ld = 0;
  size_t group_codes = 0, group_scales = 0;
};

// The operand quantized whole: codes [outer_pad, k].
Quantized quantize(DeviceState* s, ScratchSlot slot, const Fp8View& v) {
  const int outer_pad = fp8_pad(v.outer, kFp8PadOuter);
  const size_t codes_bytes = cg::aligned(size_t(outer_pad) * v.k);
  char* base = static_cast<char*>(scratch(s, slot, codes_bytes + v.pieces() * sizeof(float)));
  auto* scales = reinterpret_cast<float*>(base + codes_bytes);
  fp8_piece_scales(s, v, scales);
  fp8_quantize_codes(s, v, scales, reinterpret_cast<uint8_t*>(base), outer_pad, v.k);
  return {reinterpret_cast<const E4m3*>(base), scales, v.k};
}

// The experts' weights [groups * n, k]: their prepared codes, one [n, k_pad] block and its scales per
// expert, or else quantized here, stacked.
Quantized weights(DeviceState* s, const GroupedGemmArgs& a, const Fp8View& v) {
  if (a.fp8_b.codes) {
    return {reinterpret_cast<const E4m3*>(a.fp8_b.codes), a.fp8_b.scales, a.fp8_b.ld, a.fp8_b.group_codes,
            a.fp8_b.group_scales};
  }
  Quantized w = quantize(s, kScratchGemmB, v);
  w.group_codes = size_t(a.n) * a.k;
  w.group_scales = group_weight_scales(a.n, a.k, kPiece, 1);
  return w;
}

__global__ void fill_kernel(GroupedGemmArgs f, Quantized x, Quantized w, cg::Arrays<Gemm> out, Scales sc) {
  using Kernel = Forward::Kernel;
  for (int g = threadIdx.x; g < f.groups; g += blockDim.x) {
    const int begin = f.offsets[g], rows = f.offsets[g + 1] - begin;
    const GroupPlace p = group_place(Ragged::rows, f.m, f.n, f.k, g, begin, rows);
    out.extents[g] = cg::Extent(p.m, p.n, p.k);
    out.a[g] = x.codes + p.a;
    out.b[g] = w.codes + g * w.group_codes;
    out.d[g] = f.c + p.c;
    out.stride_a[g] = cg::with_ld<typename Kernel::InternalStrideA>(f.k);
    out.stride_b[g] = cg::with_ld<typename Kernel::InternalStrideB>(w.ld);
    out.stride_c[g] = cg::with_ld<typename Kernel::InternalStrideC>(f.n);
    out.stride_d[g] = cg::with_ld<typename Kernel::InternalStrideD>(f.n);
    sc.a[g] = x.scales + group_activation_scales(f.k, kPiece, begin);
    sc.b[g] = w.scales + g * w.group_scales;
    sc.layout_a[g] = ScaleConfig::tile_atom_to_shape_SFA(make_shape(rows, f.n, f.k, 1));
    sc.layout_b[g] = ScaleConfig::tile_atom_to_shape_SFB(make_shape(rows, f.n, f.k, 1));
  }
}

}  // namespace fp8_groups

// What this kernel computes as the per-group reference does (up to the order of the sums).
bool cutlass_grouped_fp8_covers(const GroupedGemmArgs& a) {
  if (a.ragged != Ragged::rows || !a.trans_b || !a.a || !a.b || !a.fp8.recipe) return false;
  if (a.fp8.a != Fp8Operand::activation || a.fp8.b != Fp8Operand::weight) return false;
  const Fp8Recipe& r = *a.fp8.recipe;
  const int piece = fp8_groups::kPiece;
  if (r.per_tensor || r.tile != piece || r.block != piece || r.forward != Fp8Format::e4m3) return false;
  if (a.fp8_b.codes && (a.fp8_b.transposed || a.fp8_b.ld % 16 != 0)) return false;  // prepared as TMA reads them
  // The rows' codes as their producer wrote them: rows of k codes, 16-byte aligned.
  if (a.fp8_a.codes && (a.fp8_a.ld != a.k || reinterpret_cast<uintptr_t>(a.fp8_a.codes) % 16 != 0)) return false;
  // FP8 rows of 16-byte multiples (TMA), whole weight blocks per expert, a 16-byte aligned output.
  return a.m > 0 && a.k > 0 && a.k % 16 == 0 && a.n > 0 && a.n % piece == 0 &&
         reinterpret_cast<uintptr_t>(a.c) % 16 == 0;
}

void cutlass_grouped_fp8(DeviceState* s, const GroupedGemmArgs& a) {
  using namespace fp8_groups;
  const Fp8Recipe& r = *a.fp8.recipe;
  // The ragged dimension m bounds the rows: every row the offsets can name is quantized.
  const Fp8View vx = fp8_view(r, Fp8Operand::activation, a.a, a.m, a.k, true);
  const Fp8View vw = fp8_view(r, Fp8Operand::weight, a.b, a.groups * a.n, a.k, true);
  MT_CHECK(vx.piece_outer == 1 && vx.piece_k == kPiece && vw.piece_outer == kPiece && vw.piece_k == kPiece);
  const Quantized x = a.fp8_a.codes ? Quantized{reinterpret_cast<const E4m3*>(a.fp8_a.codes), a.fp8_a.scales, a.k}
                                    : quantize(s, kScratchGemmA, vx);
  const Quantized w = weights(s, a, vw);
  char* extra = nullptr;
  const size_t bytes = cg::arrays_bytes<Gemm>(a.groups, scales_bytes(a.groups));
  auto* base = static_cast<char*>(scratch(s, kScratchPointers, bytes));
  const cg::Arrays<Gemm> arr = cg::carve<Gemm>(base, a.groups, &extra);
  const Scales sc = carve_scales(extra, a.groups);
  fill_kernel<<<1, cg::kFillThreads, 0, s->stream>>>(a, x, w, arr, sc);
  MT_CUDA_CHECK_LAUNCH();
  typename Gemm::GemmKernel::MainloopArguments main{arr.a, arr.stride_a, arr.b, arr.stride_b,
                                                     sc.a, sc.layout_a, sc.b, sc.layout_b};
  cg::launch<Gemm>(s, a.groups, arr, main, a.beta);
}

#else

bool cutlass_grouped_fp8_covers(const GroupedGemmArgs&) { return false; }
void cutlass_grouped_fp8(DeviceState*, const GroupedGemmArgs&) {}

#endif

}  // namespace mt::cuda
