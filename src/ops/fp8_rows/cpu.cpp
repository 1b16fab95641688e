// Reference FP8 row packing for the expert-parallel dispatch (math.hpp).
#include "ops/fp8_rows/math.hpp"

#include "ops/backend/cpu_ops.hpp"

namespace mt::cpu {

void fp8_pack_rows(DeviceState*, const Fp8PackRowsArgs& a) {
  const int row_floats = fp8_packed_row_floats(a.cols, a.tile);
  for (int r = 0; r < a.rows; ++r)
    fp8_pack_row(a.x + size_t(r) * a.cols, a.cols, a.tile, a.format, a.pow2_scales, a.packed + size_t(r) * row_floats);
}

void fp8_unpack_rows(DeviceState*, const Fp8UnpackRowsArgs& a) {
  const int row_floats = fp8_packed_row_floats(a.cols, a.tile);
  for (int r = 0; r < a.rows; ++r)
    fp8_unpack_row(a.packed + size_t(r) * row_floats, a.cols, a.tile, a.format, a.x + size_t(r) * a.cols);
}

}  // namespace mt::cpu
