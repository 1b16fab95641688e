#pragma once
// The CUDA device as a Backend. Plain C++ so that host code can include it without nvcc.
// Defined in kernels/cuda_backend.cu when built with CUDA, otherwise by the
// stub in src/ops/cuda_stub.cpp, so callers never need their own #ifdef.
#include <string>

#include "ops/ops.hpp"

namespace mt {

// True when a usable GPU and driver are present. Otherwise false, with a human-readable reason
// in *why (when why is non-null). Never crashes, even without the driver library.
bool cuda_available(std::string* why);

// A backend on GPU `device`: its own stream, cuBLASLt handle and workspace. Throws a
// std::runtime_error (mt::UserError) when no usable GPU is present or `device` is out of range.
Backend cuda_backend_create(int device);

// What the start banner and the device choice need to know of GPU `device`.
struct CudaDeviceInfo {
  std::string name;
  size_t free_bytes = 0, total_bytes = 0;
};
CudaDeviceInfo cuda_device_info(int device);

// Releases everything cuda_backend_create made; leaves `b` empty.
void cuda_backend_destroy(Backend& b);

}  // namespace mt
