#pragma once
// What the CUDA backend keeps per device (the DeviceState that ops.hpp leaves opaque), shared by
// the kernels/*.cu files. All state lives here, one instance per backend: no globals.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "ops/ops.hpp"

namespace mt {

// Reusable device buffers for temporaries, one per purpose so that two live temporaries of one
// op never share memory. They only grow.
enum ScratchSlot {
  kScratchGemmA = 0, kScratchGemmB, kScratchGemmOut, kScratchReduce, kScratchCounts, kScratchSort, kScratchAttention,
  kScratchPointers, kScratchSlots
};

struct DeviceState {
  int device = 0;
  int sm_count = 0;
  cudaStream_t stream = nullptr;  // every op of this backend runs in order on this stream
  cublasLtHandle_t lt = nullptr;
  cublasHandle_t blas = nullptr;  // cuBLAS proper, for its grouped GEMM (on `stream`, sharing `workspace`)
  void* workspace = nullptr;  // cuBLASLt workspace (256-byte aligned, as cudaMalloc gives)
  size_t workspace_bytes = 0;
  void* scratch[kScratchSlots] = {};
  size_t scratch_bytes[kScratchSlots] = {};
  bool fp8_fallback_noted = false;  // the one note that an FP8 GEMM ran on dequantized copies
  bool grouped_fallback_noted = false;  // the one note that cuBLAS refused a grouped GEMM
};

// Makes the state's GPU current for the calling thread, so backends on different GPUs can be
// used from one thread.
void activate(DeviceState* s);

// A device buffer of at least `bytes` for `slot`, valid until the next call for the same slot.
// Stream ordering makes reuse across consecutive ops safe.
void* scratch(DeviceState* s, ScratchSlot slot, size_t bytes);

}  // namespace mt
