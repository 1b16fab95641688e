// CPU-only builds link this instead of kernels/nccl_comm.cu, as src/ops/cuda_stub.cpp stands in for
// the CUDA backend.
#include "comm/nccl_comm.hpp"
#include "util/error.hpp"

namespace mt {

std::unique_ptr<DeviceComm> make_nccl_comm(Comm&, const Backend&) {
  throw UserError("NCCL needs a CUDA build: moetrain was built without CUDA (nvcc was not found at build time); "
                  "build with the CUDA toolkit present (make CUDA=1), or communicate through MPI on CPU ranks");
}

// Without CUDA no communicator is an NcclComm.
void open_ring_links(DeviceComm&) {}

}  // namespace mt
