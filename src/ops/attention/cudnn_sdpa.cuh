#pragma once
// cuDNN's fused attention through cudnn-frontend's SDPA graph (cudnn_sdpa.cu): causal, bf16 operands,
// fp32 statistics, one forward and one backward graph per shape, built on first use and kept in the
// backend's DeviceState (sdpa_plans). Built with the frontend's headers (MT_CUDNN=1) or without them,
// when every call says why cuDNN cannot run.
#include <string>

#include "ops/attention/cudnn_choice.hpp"
#include "ops/backend/cuda_state.cuh"

namespace mt::cuda {

// Packed bfloat16 operands, [batch*seq, heads, dim] (kv_heads for k, v, dk, dv), and lse [batch, heads,
// seq] in fp32. Forward reads q, k, v and writes o and lse; backward reads q, k, v, o, dout and lse and
// writes dq, dk and dv.
struct SdpaOperands {
  const void* q = nullptr; const void* k = nullptr; const void* v = nullptr;
  void* o = nullptr; float* lse = nullptr;
  const void* dout = nullptr; void* dq = nullptr; void* dk = nullptr; void* dv = nullptr;
};

// Why this build or this process cannot run cuDNN's attention at all, or "" when it can.
std::string cudnn_attention_missing();
// "cuDNN 9.26.0 (libcudnn.so.9)" for the banner; only after cudnn_attention_missing() returned "".
std::string cudnn_attention_library();

// The workspace bytes key's graph needs, its graph built first when new; -1, with the reason in *why,
// when cuDNN does not run key (remembered: later calls answer at once).
long long sdpa_prepare(DeviceState* st, const SdpaKey& key, std::string* why);
// Runs key's prepared graph on st->stream, with `workspace` of sdpa_prepare's bytes.
void sdpa_run(DeviceState* st, const SdpaKey& key, const SdpaOperands& x, void* workspace);
// Each shape cuDNN was asked to run and its answer, one line each ("" before the first).
std::string sdpa_shapes(const DeviceState* st);

}  // namespace mt::cuda
