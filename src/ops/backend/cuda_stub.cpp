// CPU-only builds (no nvcc at build time) link this instead of the *.cu files: the CUDA backend entry
// points exist but report that CUDA is unavailable, so callers link and behave the same in both.
#include "ops/backend/cuda_backend.hpp"
#include "util/error.hpp"

namespace mt {

namespace {
const char* const kNoCuda = "moetrain was built without CUDA (nvcc was not found at build time)";
}

bool cuda_available(std::string* why) {
  if (why) *why = kNoCuda;
  return false;
}

int cuda_device_count() { return 0; }

Backend cuda_backend_create(int, const CudaBackendOptions&) {
  throw UserError(std::string("cannot use a GPU: ") + kNoCuda);
}

CudaDeviceInfo cuda_device_info(int) { throw UserError(std::string("cannot use a GPU: ") + kNoCuda); }

void cuda_backend_destroy(Backend&) { throw UserError(std::string("cannot use a GPU: ") + kNoCuda); }

CudaFp8Operand cuda_fp8_quantize(const Backend&, const float*, int, int, bool, Fp8Operand, const Fp8Recipe&) {
  throw UserError(std::string("cannot use a GPU: ") + kNoCuda);
}

std::function<void()> cuda_fp8_matmul_only(const Backend&, const GemmArgs&) {
  throw UserError(std::string("cannot use a GPU: ") + kNoCuda);
}

std::string cuda_fp8_scaling_used(const Backend&) { throw UserError(std::string("cannot use a GPU: ") + kNoCuda); }

std::string cuda_attention_note(const Backend&) { return ""; }

std::string cuda_attention_shapes(const Backend&) { return ""; }

}  // namespace mt
