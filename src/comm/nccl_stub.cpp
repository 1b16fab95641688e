// CPU-only builds link this instead of src/comm/nccl_comm.cu and src/comm/nccl_library.cu, as
// src/ops/backend/cuda_stub.cpp stands in for the CUDA backend.
#include "comm/nccl_comm.hpp"
#include "util/error.hpp"

namespace mt {

namespace {
const char* const kNoCuda = "moetrain was built without CUDA (nvcc was not found at build time)";
}

bool nccl_available(std::string* why) {
  if (why) *why = std::string(kNoCuda) + "; build it with the CUDA toolkit present (make CUDA=1)";
  return false;
}

bool nccl_loads(const std::string& library, std::string* why) {
  if (why) *why = library + " is not loaded: " + kNoCuda;
  return false;
}

std::unique_ptr<DeviceComm> make_nccl_comm(Comm&, const Backend&) {
  throw UserError(std::string("NCCL needs a CUDA build: ") + kNoCuda +
                  "; build with the CUDA toolkit present (make CUDA=1), or communicate through MPI on CPU ranks");
}

// Without CUDA no communicator is an NcclComm.
void open_ring_links(DeviceComm&) {}

}  // namespace mt
