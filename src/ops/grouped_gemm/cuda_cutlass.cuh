#pragma once
// The CUTLASS Hopper grouped GEMMs (cuda_cutlass_bf16.cu, cuda_cutlass_fp8.cu) as cuda.cu calls them.
// Each reads the group sizes from the device offsets: a one-block kernel turns them into CUTLASS's
// problem sizes, operand pointers and strides in device memory, so the host never learns them.
// What they do not take (the *_fits and *_covers answers) runs per group in cuda.cu.
#include <cuda_bf16.h>

#include "ops/backend/cuda_state.cuh"
#include "ops/grouped_gemm/args.hpp"

namespace mt::cuda {

// Whether this build carries the CUTLASS kernels and the device runs them (compute capability 9.0:
// they are compiled for sm_90a only).
bool cutlass_grouped_available(DeviceState* s);

// Whether the bf16 kernels take a's layout: every leading dimension a multiple of 16 bytes (TMA's
// rule), so each group's operands start 16-byte aligned when the base pointers are.
bool cutlass_bf16_fits(const GroupedGemmArgs& a, const void* a16, const void* b16);

// a's product with both operands in bfloat16 (a16 and b16 laid out as a.a and a.b), fp32 output or,
// for the forward layout, bfloat16 (a.c_bf16).
void cutlass_grouped_bf16(DeviceState* s, const GroupedGemmArgs& a, const __nv_bfloat16* a16,
                          const __nv_bfloat16* b16);

// Whether a is the forward product (x W^T) in FP8 e4m3 with DeepSeek-V3's scaling, 1 x 128 pieces of
// the activation and 128 x 128 blocks of each group's weight, in a shape the FP8 kernel takes.
bool cutlass_grouped_fp8_covers(const GroupedGemmArgs& a);

// a's product (cutlass_grouped_fp8_covers(a)): both operands quantized whole, then one FP8 call.
void cutlass_grouped_fp8(DeviceState* s, const GroupedGemmArgs& a);

}  // namespace mt::cuda
