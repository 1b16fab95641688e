// The bf16 grouped GEMM through CUTLASS's Hopper kernel (TMA loads, warp-specialized cooperative
// wgmma, persistent over all groups' tiles), fp32 accumulation and output. One kernel per operand
// layout that GroupedGemmArgs describes, all with one tile configuration:
//   rows, trans_b    C[rows_g, n] = A[rows_g, k] B_g^T, B_g stored [n, k]     (forward x W^T; C in fp32,
//                    or in bfloat16 when c_bf16 asks, the fp32 sums rounded once in the epilogue)
//   rows             C[rows_g, n] = A[rows_g, k] B_g,   B_g stored [k, n]     (input gradient dy W)
//   reduce           C_g[m, n] += A_g^T B_g, A_g [rows_g, m], B_g [rows_g, n] (weight gradient; K = rows_g)
// Built for sm_90a only (wgmma); without CUTLASS's headers (MT_CUTLASS=0) nothing here runs.
#include "ops/grouped_gemm/cuda_cutlass.cuh"

#if MT_CUTLASS
#include <type_traits>

#include "ops/grouped_gemm/cutlass_groups.cuh"
#include "ops/grouped_gemm/group_place.hpp"
#endif

namespace mt::cuda {

bool cutlass_grouped_available(DeviceState* s) {
#if MT_CUTLASS
  // Asked once per device: the kernels carry sm_90a code only.
  static int known[64] = {};
  int& k = known[s->device & 63];
  if (k == 0) {
    int major = 0, minor = 0;
    MT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, s->device));
    MT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, s->device));
    k = major == 9 && minor == 0 ? 1 : -1;
  }
  return k == 1;
#else
  (void)s;
  return false;
#endif
}

bool cutlass_bf16_fits(const GroupedGemmArgs& a, const void* a16, const void* b16) {
  auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const void* out = a.c_bf16 ? static_cast<const void*>(a.c_bf16) : a.c;
  if (!aligned16(a16) || !aligned16(b16) || !aligned16(out) || a.n <= 0) return false;
  // A bfloat16 output has a kernel for the forward's layout only; the others run per group.
  if (a.c_bf16 && (a.ragged != Ragged::rows || !a.trans_b)) return false;
  // Leading dimensions in elements: bf16 operands and outputs need multiples of 8, fp32 outputs of 4.
  // The ragged dimension must bound the rows: it sizes the rounding of fp32 operands.
  if (a.ragged == Ragged::rows) return a.m > 0 && a.k > 0 && a.k % 8 == 0 && a.n % 8 == 0;
  return a.k > 0 && a.m > 0 && a.m % 8 == 0 && a.n % 8 == 0;
}

#if MT_CUTLASS

// A named namespace: nvcc's generated launch stubs cannot name kernel template arguments that live
// in an anonymous one.
namespace bf16_groups {

using namespace cute;
namespace cg = cutlass_groups;
using Bfloat16 = cutlass::bfloat16_t;

// One tile configuration: 128 x 128 output tiles, 64 deep along K, no clusters (a group's tiles
// need no multicast partner, so small groups waste nothing). The epilogue differs only in its output.
using Tile = Shape<_128, _128, _64>;
using Cluster = Shape<_1, _1, _1>;
using Epilogue = cg::Epilogue<Tile, Cluster>;
using EpilogueBf16 = cg::Epilogue<Tile, Cluster, Bfloat16>;

template <class LayoutA, class LayoutB, class Epi = Epilogue>
struct Bf16Gemm {
  static constexpr int kEpilogueBytes = static_cast<int>(sizeof(typename Epi::SharedStorage));
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bfloat16, LayoutA*, 8, Bfloat16, LayoutB*, 8, float, Tile,
      Cluster, cutlass::gemm::collective::StageCountAutoCarveout<kEpilogueBytes>,
      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cg::ProblemShape, Mainloop, Epi>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

using RowMajor = cutlass::layout::RowMajor;
using ColumnMajor = cutlass::layout::ColumnMajor;
// Classes rather than aliases: nvcc's launch stubs name a kernel's template arguments as written.
struct Forward : Bf16Gemm<RowMajor, ColumnMajor> {};  // CUTLASS's B [N, K] K-major: B_g stored [n, k]
struct ForwardBf16Out : Bf16Gemm<RowMajor, ColumnMajor, EpilogueBf16> {};  // the same, bfloat16 C
struct Dgrad : Bf16Gemm<RowMajor, RowMajor> {};       // B_g stored [k, n]
struct Wgrad : Bf16Gemm<ColumnMajor, RowMajor> {};    // A_g^T: A_g stored [rows_g, m]

// Group g's extent, operands and strides from the device offsets (group_place). Strides are the same
// for every group; an empty group gets an empty extent (no tiles, nothing read or written).
template <class Config>
__global__ void fill_kernel(GroupedGemmArgs f, const Bfloat16* a, const Bfloat16* b,
                            cg::Arrays<typename Config::Gemm> out) {
  using Kernel = typename Config::Kernel;
  const bool by_rows = f.ragged == Ragged::rows;
  for (int g = threadIdx.x; g < f.groups; g += blockDim.x) {
    const int begin = f.offsets[g];
    const GroupPlace p = group_place(f.ragged, f.m, f.n, f.k, g, begin, f.offsets[g + 1] - begin);
    out.extents[g] = cg::Extent(p.m, p.n, p.k);
    out.a[g] = a + p.a;
    out.b[g] = b + p.b;
    if constexpr (std::is_same_v<typename Kernel::ElementD, float>) out.d[g] = f.c + p.c;
    else out.d[g] = reinterpret_cast<Bfloat16*>(f.c_bf16) + p.c;
    // Leading dimensions: A [rows, k] or [rows, m]; B [n, k], [k, n] or [rows, n]; C [., n].
    out.stride_a[g] = cg::with_ld<typename Kernel::InternalStrideA>(by_rows ? f.k : f.m);
    out.stride_b[g] = cg::with_ld<typename Kernel::InternalStrideB>(by_rows && f.trans_b ? f.k : f.n);
    out.stride_c[g] = cg::with_ld<typename Kernel::InternalStrideC>(f.n);
    out.stride_d[g] = cg::with_ld<typename Kernel::InternalStrideD>(f.n);
  }
}

template <class Config>
void run(DeviceState* s, const GroupedGemmArgs& a, const Bfloat16* a16, const Bfloat16* b16) {
  using Gemm = typename Config::Gemm;
  char* extra = nullptr;
  auto* base = static_cast<char*>(scratch(s, kScratchPointers, cg::arrays_bytes<Gemm>(a.groups, 0)));
  const cg::Arrays<Gemm> arr = cg::carve<Gemm>(base, a.groups, &extra);
  fill_kernel<Config><<<1, cg::kFillThreads, 0, s->stream>>>(a, a16, b16, arr);
  MT_CUDA_CHECK_LAUNCH();
  typename Gemm::GemmKernel::MainloopArguments main{arr.a, arr.stride_a, arr.b, arr.stride_b};
  cg::launch<Gemm>(s, a.groups, arr, main, a.ragged == Ragged::rows ? a.beta : 1.0f);
}

}  // namespace bf16_groups

void cutlass_grouped_bf16(DeviceState* s, const GroupedGemmArgs& a, const __nv_bfloat16* a16,
                          const __nv_bfloat16* b16) {
  using bf16_groups::Bfloat16;
  const auto* x = reinterpret_cast<const Bfloat16*>(a16);
  const auto* w = reinterpret_cast<const Bfloat16*>(b16);
  using namespace bf16_groups;
  if (a.ragged == Ragged::reduce) run<Wgrad>(s, a, x, w);
  else if (a.trans_b && a.c_bf16) run<ForwardBf16Out>(s, a, x, w);
  else if (a.trans_b) run<Forward>(s, a, x, w);
  else run<Dgrad>(s, a, x, w);
}

#else

void cutlass_grouped_bf16(DeviceState*, const GroupedGemmArgs&, const __nv_bfloat16*, const __nv_bfloat16*) {}

#endif

}  // namespace mt::cuda
