// FP8 row packing for the expert-parallel dispatch on the GPU: one thread a row, running the row
// rule of math.hpp that the CPU reference runs, so the packed bytes are identical.
#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/launch.cuh"
#include "ops/fp8_rows/math.hpp"

namespace mt::cuda {

namespace {

__global__ void pack_kernel(Fp8PackRowsArgs a, int row_floats) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < a.rows)
    fp8_pack_row(a.x + size_t(r) * a.cols, a.cols, a.tile, a.format, a.pow2_scales, a.packed + size_t(r) * row_floats);
}

__global__ void unpack_kernel(Fp8UnpackRowsArgs a, int row_floats) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < a.rows) fp8_unpack_row(a.packed + size_t(r) * row_floats, a.cols, a.tile, a.format, a.x + size_t(r) * a.cols);
}

}  // namespace

void fp8_pack_rows(DeviceState* s, const Fp8PackRowsArgs& a) {
  if (a.rows == 0) return;
  activate(s);
  pack_kernel<<<blocks_for(a.rows), kBlock, 0, s->stream>>>(a, fp8_packed_row_floats(a.cols, a.tile));
  MT_CUDA_CHECK_LAUNCH();
}

void fp8_unpack_rows(DeviceState* s, const Fp8UnpackRowsArgs& a) {
  if (a.rows == 0) return;
  activate(s);
  unpack_kernel<<<blocks_for(a.rows), kBlock, 0, s->stream>>>(a, fp8_packed_row_floats(a.cols, a.tile));
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
