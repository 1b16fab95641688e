#pragma once
// The CUDA implementations of the op table (src/ops/ops.hpp); kernels/cuda_backend.cu puts them
// in the table. Entries not declared here are still missing on CUDA (see missing_ops()).
#include "ops/ops.hpp"

namespace mt::cuda {

void gemm(DeviceState*, const GemmArgs&);
void rmsnorm_forward(DeviceState*, const RmsNormForwardArgs&);
void rmsnorm_backward_input(DeviceState*, const RmsNormBackwardInputArgs&);
void rmsnorm_backward_weight(DeviceState*, const RmsNormBackwardWeightArgs&);
void attention_forward(DeviceState*, const AttentionForwardArgs&);
void attention_backward(DeviceState*, const AttentionBackwardArgs&);

}  // namespace mt::cuda
