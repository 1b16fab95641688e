#pragma once
// The CUDA implementations of the op table (src/ops/ops.hpp); kernels/cuda_backend.cu puts them
// in the table. Entries not declared here are still missing on CUDA (see missing_ops()).
#include "ops/ops.hpp"

namespace mt::cuda {

void gemm(DeviceState*, const GemmArgs&);
void rmsnorm_forward(DeviceState*, const RmsNormForwardArgs&);
void rmsnorm_backward_input(DeviceState*, const RmsNormBackwardInputArgs&);
void rmsnorm_backward_weight(DeviceState*, const RmsNormBackwardWeightArgs&);
void rope(DeviceState*, const RopeArgs&);
void swiglu_forward(DeviceState*, const SwigluForwardArgs&);
void swiglu_backward(DeviceState*, const SwigluBackwardArgs&);
double cross_entropy(DeviceState*, const CrossEntropyArgs&);
void embedding_forward(DeviceState*, const EmbeddingForwardArgs&);
void embedding_backward(DeviceState*, const EmbeddingBackwardArgs&);
void add(DeviceState*, const AddArgs&);
void copy_columns(DeviceState*, const CopyColumnsArgs&);

}  // namespace mt::cuda
