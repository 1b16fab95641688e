#pragma once
// Launch sizes shared by the kernels of this folder.
#include <cstddef>

#include "cuda_check.cuh"
#include "cuda_state.cuh"

namespace mt::cuda {

constexpr int kBlock = 256;  // threads of a one-dimensional block

// Blocks for a grid-stride loop over n items: enough to fill the GPU a few times over.
inline unsigned grid_stride_blocks(const DeviceState* s, size_t n) {
  const size_t want = (n + kBlock - 1) / kBlock;
  const size_t cap = size_t(s->sm_count > 0 ? s->sm_count : 1) * 16;
  return unsigned(want == 0 ? 1 : want < cap ? want : cap);
}

// Downloads one value the stream has computed (waits for it).
template <class T>
T read_back(DeviceState* s, const T* device) {
  T host{};
  MT_CUDA_CHECK(cudaMemcpyAsync(&host, device, sizeof(T), cudaMemcpyDeviceToHost, s->stream));
  MT_CUDA_CHECK(cudaStreamSynchronize(s->stream));
  return host;
}

}  // namespace mt::cuda
