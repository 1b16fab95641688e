#pragma once
// Failure reporting for CUDA runtime and cuBLAS calls. A failing call here is an internal error
// (bad launch, out of memory, misuse of the API), not a user input problem, so it prints the
// call, the error and file:line, and exits with status 3 like MT_CHECK.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace mt {

inline void cuda_check(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "moetrain CUDA error: %s returned %s (%s) at %s:%d\n", call, cudaGetErrorName(e),
               cudaGetErrorString(e), file, line);
  std::exit(3);
}

// cuBLASLt's status names, which cover the statuses of cuBLAS proper too.
inline void cublas_check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "moetrain cuBLAS error: %s returned %s (%s) at %s:%d\n", call, cublasLtGetStatusName(s),
               cublasLtGetStatusString(s), file, line);
  std::exit(3);
}

}  // namespace mt

#define MT_CUDA_CHECK(call) ::mt::cuda_check((call), #call, __FILE__, __LINE__)
#define MT_CUBLAS_CHECK(call) ::mt::cublas_check((call), #call, __FILE__, __LINE__)
// After a <<<...>>> launch: catches bad configurations at once (execution errors surface later).
#define MT_CUDA_CHECK_LAUNCH() ::mt::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
