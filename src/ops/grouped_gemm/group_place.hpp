#pragma once
// Where group g of a grouped GEMM sits in the whole operands: the extent of its product (M, N, K as
// CUTLASS takes them) and the element offsets of its A, B and C, from its first row and row count.
// The CUDA kernels that fill CUTLASS's per-group arrays on the device use it, and a unit test holds
// it to group_gemms (groups.hpp), the split the CPU reference runs.
#include <cstddef>

#include "ops/grouped_gemm/args.hpp"
#include "ops/host_device.hpp"

namespace mt {

struct GroupPlace {
  int m = 0, n = 0, k = 0;
  size_t a = 0, b = 0, c = 0;
};

// m, n and k as GroupedGemmArgs holds them. An empty group of the reduce form gets an empty extent
// (its K is zero, and C_g += nothing): no tiles, nothing read or written.
MT_HD inline GroupPlace group_place(Ragged ragged, int m, int n, int k, int g, int begin, int rows) {
  if (ragged == Ragged::rows) return {rows, n, k, size_t(begin) * k, size_t(g) * n * k, size_t(begin) * n};
  const GroupPlace place{rows > 0 ? m : 0, rows > 0 ? n : 0, rows, size_t(begin) * m, size_t(begin) * n,
                         size_t(g) * m * n};
  return place;
}

// The offsets of group g's first scale in FP8 piece scales laid out row-major over [pieces_outer,
// pieces_k] (ops/fp8/quantize_cuda.cuh): the activation's 1 x `piece` pieces of its rows, and the
// stacked weights' `piece` x `piece` blocks (n a multiple of `piece`).
MT_HD inline size_t group_activation_scales(int k, int piece, int begin) {
  return size_t(begin) * ((k + piece - 1) / piece);
}
MT_HD inline size_t group_weight_scales(int n, int k, int piece, int g) {
  return size_t(g) * (n / piece) * ((k + piece - 1) / piece);
}

}  // namespace mt
