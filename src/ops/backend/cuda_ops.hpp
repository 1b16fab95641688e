#pragma once
// The CUDA implementations of every op of ops/op_list.hpp (each in its family's cuda.cu);
// backend/cuda_backend.cu puts them in the table.
#include "ops/ops.hpp"

namespace mt::cuda {

MT_OPS(MT_OP_DECLARATION)

}  // namespace mt::cuda
