#pragma once
// The two ways the CUDA grouped GEMM runs (cuda.cu), for the parity checks and the benchmark that
// hold CUTLASS's grouped kernels to the per-group reference and time one against the other.
#include "ops/ops.hpp"

namespace mt {

// How the CUDA backend runs a: "cutlass-bf16", "cutlass-fp8" or "per-group".
const char* cuda_grouped_gemm_path(const Backend& gpu, const GroupedGemmArgs& a);

// a through the per-group path (the offsets downloaded, then one GEMM per non-empty group), whatever
// the backend would choose.
void cuda_grouped_gemm_per_group(const Backend& gpu, const GroupedGemmArgs& a);

}  // namespace mt
