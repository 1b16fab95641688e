// fp8_code_rows (row_codes.cuh): one warp per piece of a row, the padding rows' warps writing zero
// codes, the last piece of every row the zero codes past its end.
#include "ops/backend/launch.cuh"
#include "ops/fp8/row_codes.cuh"

namespace mt::cuda {

namespace {

__global__ void code_rows_kernel(const float* x, int rows, int cols, Fp8RowCodes q) {
  const int pieces = fp8_row_pieces(cols, q.tile), lane = threadIdx.x & 31;
  const size_t units = size_t(q.rows_pad) * pieces, warps = (size_t(gridDim.x) * blockDim.x) >> 5;
  for (size_t w = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; w < units; w += warps) {
    const int r = int(w / pieces), p = int(w % pieces);
    if (r < rows) fp8_code_stored_piece_warp(x + size_t(r) * cols, r, p, cols, q);
    else fp8_zero_codes(q, r, p * q.tile, min(cols, (p + 1) * q.tile), lane, 32);
    if (p == pieces - 1) fp8_zero_codes(q, r, cols, q.ld, lane, 32);
  }
}

}  // namespace

void fp8_code_rows(DeviceState* s, const float* x, int rows, int cols, const Fp8RowCodes& q) {
  if (rows == 0 || cols == 0) return;
  activate(s);
  const size_t threads = size_t(q.rows_pad) * fp8_row_pieces(cols, q.tile) * 32;
  code_rows_kernel<<<stride_grid(s, threads, kBlock), kBlock, 0, s->stream>>>(x, rows, cols, q);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
