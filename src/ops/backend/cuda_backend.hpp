#pragma once
// The CUDA device as a Backend. Plain C++ so that host code can include it without nvcc.
// Defined in src/ops/backend/cuda_backend.cu when built with CUDA, otherwise by the
// stub in src/ops/backend/cuda_stub.cpp, so callers never need their own #ifdef.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops/attention/cudnn_choice.hpp"
#include "ops/ops.hpp"

namespace mt {

// True when a usable GPU and driver are present. Otherwise false, with a human-readable reason
// in *why (when why is non-null). Never crashes, even without the driver library.
bool cuda_available(std::string* why);

// CUDA devices this process sees (CUDA_VISIBLE_DEVICES applied); 0 when there is no driver or GPU.
int cuda_device_count();

// How a CUDA backend runs what it can run more than one way; only gpu_parity leaves the defaults.
struct CudaBackendOptions {
  // Every fp32 and bf16 GEMM through the path taken when cuBLASLt's heuristic finds no algorithm
  // (cublasGemmEx), so that path is checked on shapes cuBLASLt does run. Each call is counted as a
  // gemm fallback (backend_fallbacks).
  bool force_gemm_fallback = false;
  // Causal attention with bf16 products on cuDNN's fused attention where it runs the shape and libcudnn
  // loads (automatic), always (cudnn: an error where it cannot), or never (own).
  AttentionImpl attention = AttentionImpl::automatic;
};

// A backend on GPU `device`: its own stream, cuBLASLt handle and workspace. Throws a
// std::runtime_error (mt::UserError) when no usable GPU is present or `device` is out of range.
Backend cuda_backend_create(int device, const CudaBackendOptions& options = {});

// How `gpu` runs attention with bf16 products, for the banner: "cuDNN 9.26.0 (libcudnn.so.9) where it runs
// the shape, else the own kernels", or "own kernels (why cuDNN cannot)".
std::string cuda_attention_note(const Backend& gpu);
// Each attention shape `gpu` has run with bf16 products and whether cuDNN or the own kernels ran it, a line
// each, for `train --profile` ("" when none).
std::string cuda_attention_shapes(const Backend& gpu);

// What the start banner and the device choice need to know of GPU `device`.
struct CudaDeviceInfo {
  std::string name;
  size_t free_bytes = 0, total_bytes = 0;
};
CudaDeviceInfo cuda_device_info(int device);

// Releases everything cuda_backend_create made; leaves `b` empty.
void cuda_backend_destroy(Backend& b);


// For tests: the FP8 codes and scales the CUDA GEMM makes of one operand. x (device memory) is
// stored [rows, cols] with the product's K along its rows (k_along_rows) or its columns. codes come
// back as cuBLASLt reads them, [outer_pad, k_pad] with K contiguous and zeros in the padding;
// scales one per piece, row-major over the [outer, k] grid of pieces (piece_outer x piece_k).
struct CudaFp8Operand {
  int outer = 0, k = 0, outer_pad = 0, k_pad = 0, piece_outer = 1, piece_k = 1;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};
CudaFp8Operand cuda_fp8_quantize(const Backend& gpu, const float* x, int rows, int cols, bool k_along_rows,
                                 Fp8Operand kind, const Fp8Recipe& recipe);

// For benchmarks: the matmul of FP8 GEMM `g` (inputs fp8, m, n, k > 0) without its quantization.
// Quantizes g's operands now, once, into `gpu`'s scratch buffers (or, for a product cuBLASLt cannot
// run in FP8, makes their dequantized fp32 copies) and returns the call that multiplies them into
// g.c as gpu.gemm(g) would. The call is valid until the backend's next GEMM. `gpu` is a backend
// cuda_backend_create made.
std::function<void()> cuda_fp8_matmul_only(const Backend& gpu, const GemmArgs& g);

// How the backend's last FP8 GEMM ran: cuBLASLt's scale modes of its A and B, e.g.
// "VEC128/BLK128x128" or "SCALAR/SCALAR"; "fallback-fp32" when it ran as fp32 over the
// dequantized values; "none" before the first.
std::string cuda_fp8_scaling_used(const Backend& gpu);

}  // namespace mt
