#pragma once
// The attention ops on cuDNN's fused attention (cudnn_attention.cu), for cuda.cu to try first.
#include "ops/backend/cuda_state.cuh"

namespace mt::cuda {

// Runs a on cuDNN and returns true when the backend's choice for its shape is cuDNN; returns false,
// doing nothing, when the own kernels are to run it. Throws a UserError when cuDNN was required
// (AttentionImpl::cudnn) and cannot run it.
bool cudnn_attention_forward(DeviceState* st, const AttentionForwardArgs& a);
bool cudnn_attention_backward(DeviceState* st, const AttentionBackwardArgs& a);

}  // namespace mt::cuda
