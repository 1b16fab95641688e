#pragma once
// What the CUTLASS grouped GEMMs (cuda_cutlass_bf16.cu, cuda_cutlass_fp8.cu) share: the per-group
// arrays CUTLASS reads (problem sizes, operand pointers, strides), kept in one scratch buffer that
// grows only when a call has more groups than any before, and the launch on the backend's stream.
// Built after CUTLASS's examples 57 (grouped GEMM) and 68 (FP8 grouped GEMM with blockwise scaling):
// the problem sizes live only in device memory (no host copy), the kernel is persistent and
// rewrites its TMA descriptors per group.
#include <cstdio>
#include <cstdlib>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/cuda_state.cuh"
#include "ops/grouped_gemm/args.hpp"

namespace mt::cuda::cutlass_groups {

using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
using Extent = ProblemShape::UnderlyingProblemShape;

// The epilogue of every grouped kernel here: C and D of type Out (fp32, or bfloat16 for an output
// only SwiGLU reads), row-major, D = beta C + acc computed in fp32 and converted to Out once, to
// nearest even; C and D share pointers. Instantiate it at namespace scope: nvcc's host pass misnames
// it inside a class template that does not depend on it.
template <class Tile, class Cluster, class Out = float>
using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto,
    float, float, Out, cutlass::layout::RowMajor*, 16 / sizeof(Out), Out, cutlass::layout::RowMajor*,
    16 / sizeof(Out), cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
    cutlass::epilogue::fusion::LinearCombination<Out, float, Out, float,
                                                 cutlass::FloatRoundStyle::round_to_nearest>>::CollectiveOp;

// A stride of CUTLASS's (M or N, K, L) form whose one dynamic entry is the leading dimension.
template <class Stride>
CUTE_HOST_DEVICE Stride with_ld(int64_t ld) {
  Stride s{};
  if constexpr (cute::is_static_v<cute::remove_cvref_t<decltype(cute::get<0>(s))>>) cute::get<1>(s) = ld;
  else cute::get<0>(s) = ld;
  return s;
}

// The arrays of one call, one entry per group; C and D share pointers (beta = 1 adds in place).
template <class Gemm>
struct Arrays {
  using Kernel = typename Gemm::GemmKernel;
  using ElementA = typename Kernel::ElementA;
  using ElementB = typename Kernel::ElementB;
  using ElementD = typename Kernel::ElementD;
  Extent* extents;
  const ElementA** a;
  const ElementB** b;
  ElementD** d;
  typename Kernel::InternalStrideA* stride_a;
  typename Kernel::InternalStrideB* stride_b;
  typename Kernel::InternalStrideC* stride_c;
  typename Kernel::InternalStrideD* stride_d;
};

constexpr size_t kAlign = 256;
inline size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The bytes Arrays<Gemm> takes for `groups` groups plus `extra` bytes for a caller's own arrays, and
// their places in `base` (the extra bytes start at *extra_at).
template <class Gemm>
size_t arrays_bytes(int groups, size_t extra) {
  using A = Arrays<Gemm>;
  return aligned(groups * sizeof(Extent)) + 3 * aligned(groups * sizeof(void*)) +
         aligned(groups * sizeof(*A{}.stride_a)) + aligned(groups * sizeof(*A{}.stride_b)) +
         aligned(groups * sizeof(*A{}.stride_c)) + aligned(groups * sizeof(*A{}.stride_d)) + aligned(extra);
}
template <class Gemm>
Arrays<Gemm> carve(char* base, int groups, char** extra_at) {
  Arrays<Gemm> out{};
  auto take = [&](auto*& p, size_t each) {
    p = reinterpret_cast<std::remove_reference_t<decltype(p)>>(base);
    base += aligned(groups * each);
  };
  take(out.extents, sizeof(Extent));
  take(out.a, sizeof(void*));
  take(out.b, sizeof(void*));
  take(out.d, sizeof(void*));
  take(out.stride_a, sizeof(*out.stride_a));
  take(out.stride_b, sizeof(*out.stride_b));
  take(out.stride_c, sizeof(*out.stride_c));
  take(out.stride_d, sizeof(*out.stride_d));
  *extra_at = base;
  return out;
}

// Threads of the one block that fills the arrays (a loop covers more groups).
constexpr int kFillThreads = 256;

inline void check_status(cutlass::Status status, const char* what) {
  if (status == cutlass::Status::kSuccess) return;
  std::fprintf(stderr, "moetrain CUTLASS error: %s returned %s\n", what, cutlass::cutlassGetStatusString(status));
  std::exit(3);
}

// Runs Gemm over the arrays on s's stream. Its workspace (the TMA descriptors each SM rewrites per
// group) is the cuBLASLt workspace when that is large enough, else a scratch slot: no allocation
// after the first call of a shape.
template <class Gemm>
void launch(DeviceState* s, int groups, const Arrays<Gemm>& arr, typename Gemm::GemmKernel::MainloopArguments main,
            float beta) {
  typename Gemm::Arguments args;
  args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
  args.problem_shape = {groups, arr.extents, nullptr};
  args.mainloop = main;
  auto& fusion = args.epilogue.thread;
  fusion.alpha = 1.0f;
  fusion.beta = beta;
  // beta = 0 reads no C: CUTLASS then takes no source at all (a poisoned output stays unread).
  using ElementD = typename Arrays<Gemm>::ElementD;
  args.epilogue.ptr_C = beta == 0.0f ? nullptr : const_cast<const ElementD**>(arr.d);
  args.epilogue.dC = arr.stride_c;
  args.epilogue.ptr_D = arr.d;
  args.epilogue.dD = arr.stride_d;
  args.hw_info.device_id = s->device;
  args.hw_info.sm_count = s->sm_count;
  Gemm gemm;
  check_status(gemm.can_implement(args), "can_implement");
  const size_t need = Gemm::get_workspace_size(args);
  void* workspace = need <= s->workspace_bytes ? s->workspace : scratch(s, kScratchGemmOut, need);
  check_status(gemm.initialize(args, workspace, s->stream), "initialize");
  check_status(gemm.run(s->stream), "run");
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda::cutlass_groups
