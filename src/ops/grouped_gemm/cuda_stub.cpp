// CPU-only builds link this instead of cuda.cu: the grouped GEMM's CUDA paths exist but say that
// CUDA is unavailable, as src/ops/backend/cuda_stub.cpp does for the backend.
#include <string>

#include "ops/grouped_gemm/cuda_paths.hpp"
#include "util/error.hpp"

namespace mt {

const char* cuda_grouped_gemm_path(const Backend&, const GroupedGemmArgs&) { return "none (built without CUDA)"; }

void cuda_grouped_gemm_per_group(const Backend&, const GroupedGemmArgs&) {
  throw UserError("cannot use a GPU: moetrain was built without CUDA (nvcc was not found at build time)");
}

}  // namespace mt
