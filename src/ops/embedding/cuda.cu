// Embedding lookup and its gradient on the GPU, the same semantics as cpu.cpp.
// The backward pass is deterministic without atomics: a stable radix sort (CUB) orders the rows by token,
// keeping rows of one token in row order, and blocks of the token's first row add that token's rows to its
// table row in that order. That is the CPU's order of additions too, so the result is bit-identical to the CPU's.
#include <algorithm>

#include <cub/device/device_radix_sort.cuh>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/cuda_state.cuh"
#include "ops/backend/launch.cuh"

namespace mt::cuda {

namespace {

constexpr int kMaxRowThreads = 256;
constexpr int kThreads = 256;
constexpr int kMaxGridY = 65535;
constexpr size_t kAlign = 256;  // sub-buffers of the scratch allocation start on cudaMalloc's alignment

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// One block per row (any int row count fits grid.x).
__global__ void forward_kernel(const int* tokens, const float* table, float* out, int dim) {
  const float* src = table + size_t(tokens[blockIdx.x]) * dim;
  float* dst = out + size_t(blockIdx.x) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i];
}

__global__ void iota_kernel(int* v, int n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < size_t(n); i += size_t(gridDim.x) * blockDim.x)
    v[i] = int(i);
}

// Block (p, y) of the rows sorted by token: if p is the first row of its token, adds all rows of the token
// (they follow p, in row order) to the token's table row, for the columns of column block y (looping past
// grid.y blocks); blocks at any other p return at once. Column blocks let a frequent token's sum spread
// over several SMs.
__global__ void backward_kernel(const int* sorted_tokens, const int* sorted_rows, const float* dout, float* dtable,
                                int rows, int dim) {
  const int p = blockIdx.x;
  const int token = sorted_tokens[p];
  if (p > 0 && sorted_tokens[p - 1] == token) return;
  int end = p + 1;
  while (end < rows && sorted_tokens[end] == token) ++end;
  float* dst = dtable + size_t(token) * dim;
  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < dim; i += gridDim.y * blockDim.x) {
    float acc = dst[i];
    for (int q = p; q < end; ++q) acc += dout[size_t(sorted_rows[q]) * dim + i];
    dst[i] = acc;
  }
}

}  // namespace

void embedding_forward(DeviceState* s, const EmbeddingForwardArgs& a) {
  if (a.rows <= 0 || a.dim <= 0) return;
  activate(s);
  forward_kernel<<<a.rows, row_threads(a.dim, kMaxRowThreads), 0, s->stream>>>(a.tokens, a.table, a.out, a.dim);
  MT_CUDA_CHECK_LAUNCH();
}

void embedding_backward(DeviceState* s, const EmbeddingBackwardArgs& a) {
  if (a.rows <= 0 || a.dim <= 0) return;
  activate(s);
  const int n = a.rows;
  size_t sort_bytes = 0;
  MT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, a.tokens, static_cast<int*>(nullptr),
                                                static_cast<const int*>(nullptr), static_cast<int*>(nullptr), n, 0,
                                                int(sizeof(int) * 8), s->stream));
  // One scratch allocation: row numbers, sorted tokens, sorted row numbers, then the sort's own storage.
  const size_t ints = aligned(size_t(n) * sizeof(int));
  char* buf = static_cast<char*>(scratch(s, kScratchSort, 3 * ints + sort_bytes));
  int* rows_in = reinterpret_cast<int*>(buf);
  int* sorted_tokens = reinterpret_cast<int*>(buf + ints);
  int* sorted_rows = reinterpret_cast<int*>(buf + 2 * ints);
  iota_kernel<<<stride_grid(s, size_t(n), kThreads), kThreads, 0, s->stream>>>(rows_in, n);
  MT_CUDA_CHECK_LAUNCH();
  MT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(buf + 3 * ints, sort_bytes, a.tokens, sorted_tokens, rows_in,
                                                sorted_rows, n, 0, int(sizeof(int) * 8), s->stream));
  const int threads = row_threads(a.dim, kMaxRowThreads);
  const dim3 grid(n, std::min((a.dim + threads - 1) / threads, kMaxGridY));
  backward_kernel<<<grid, threads, 0, s->stream>>>(sorted_tokens, sorted_rows, a.dout, a.dtable, n, a.dim);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
