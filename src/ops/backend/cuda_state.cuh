#pragma once
// What the CUDA backend keeps per device (the DeviceState that ops.hpp leaves opaque), shared by
// the op families' *.cu files. All state lives here, one instance per backend: no globals.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "ops/attention/cudnn_choice.hpp"
#include "ops/backend/fallback_counts.hpp"
#include "ops/ops.hpp"

namespace mt {

namespace cuda {
struct LtPlans;  // ops/gemm/cuda_lt.cuh
struct SdpaPlans;  // ops/attention/cudnn_sdpa.cu
}

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
  bool grouped_fallback_noted = false;  // the one note that cuBLAS refused a grouped GEMM
  // Every fp32 and bf16 GEMM through the path taken when cuBLASLt finds no algorithm
  // (CudaBackendOptions::force_gemm_fallback).
  bool force_gemm_fallback = false;
  FallbackCounts fallbacks;  // GEMMs that ran another way than their first choice
  // The scale modes cuBLASLt ran the last FP8 GEMM with, for our A and B (static names), or
  // fp8_dequantized: it ran as fp32 over the dequantized values. Null before the first FP8 GEMM.
  const char* fp8_scaling[2] = {nullptr, nullptr};
  bool fp8_dequantized = false;
  std::shared_ptr<cuda::LtPlans> lt_plans;  // cuBLASLt descriptors and algorithms per GEMM shape, made on first use
  AttentionImpl attention = AttentionImpl::automatic;  // CudaBackendOptions::attention
  std::shared_ptr<cuda::SdpaPlans> sdpa_plans;  // cuDNN's handle and attention graphs per shape, made on first use
};

// Makes the state's GPU current for the calling thread, so backends on different GPUs can be
// used from one thread.
void activate(DeviceState* s);

// A device buffer of at least `bytes` for `slot`, valid until the next call for the same slot.
// Stream ordering makes reuse across consecutive ops safe.
void* scratch(DeviceState* s, ScratchSlot slot, size_t bytes);

}  // namespace mt
