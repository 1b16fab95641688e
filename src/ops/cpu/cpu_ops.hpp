#pragma once
// The CPU reference implementations of the op table (src/ops/ops.hpp).
#include "ops/ops.hpp"

namespace mt::cpu {

void gemm(DeviceState*, const GemmArgs&);
void rmsnorm_forward(DeviceState*, const RmsNormForwardArgs&);
void rmsnorm_backward_input(DeviceState*, const RmsNormBackwardInputArgs&);
void rmsnorm_backward_weight(DeviceState*, const RmsNormBackwardWeightArgs&);
void rope(DeviceState*, const RopeArgs&);
void attention_forward(DeviceState*, const AttentionForwardArgs&);
void attention_backward(DeviceState*, const AttentionBackwardArgs&);
void swiglu_forward(DeviceState*, const SwigluForwardArgs&);
void swiglu_backward(DeviceState*, const SwigluBackwardArgs&);
double cross_entropy(DeviceState*, const CrossEntropyArgs&);
void embedding_forward(DeviceState*, const EmbeddingForwardArgs&);
void embedding_backward(DeviceState*, const EmbeddingBackwardArgs&);
void add(DeviceState*, const AddArgs&);
void copy_columns(DeviceState*, const CopyColumnsArgs&);

}  // namespace mt::cpu
