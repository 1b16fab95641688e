#pragma once
// Launch shapes shared by the kernels.
#include <cstddef>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_state.cuh"

namespace mt::cuda {

constexpr int kBlock = 256;  // threads of a one-dimensional block

// Blocks for a grid-stride loop over n items: what the items need, at most enough to fill every SM a few
// times over (far below the grid.x limit, so any n works).
inline unsigned stride_grid(const DeviceState* s, size_t n, int threads) {
  const size_t want = (n + threads - 1) / threads;
  const size_t cap = size_t(s->sm_count > 0 ? s->sm_count : 1) * 16;
  return unsigned(want == 0 ? 1 : want < cap ? want : cap);
}

// Blocks of kBlock threads for one thread per item.
inline unsigned blocks_for(size_t n) { return unsigned((n + kBlock - 1) / kBlock); }

// Threads for one block per row of `cols` values: a whole number of warps, at most `max_threads`.
inline int row_threads(int cols, int max_threads) {
  const int warps = (cols + 31) / 32;
  return warps < 1 ? 32 : warps * 32 < max_threads ? warps * 32 : max_threads;
}

}  // namespace mt::cuda
