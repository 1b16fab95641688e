// The attention ops through cuDNN (cudnn_sdpa.cu) where the backend's choice (cudnn_choice.hpp) says so:
// q, k, v (and out, dout for backward) are staged into packed bfloat16 in the attention scratch, cuDNN
// runs the shape's graph there, and out (or dq, dk, dv) come back to fp32 in the caller's layout. lse is
// cuDNN's statistics tensor, written in place: the log-sum-exp of the scaled scores in the [batch, heads,
// seq] layout the own backward reads, so either backward takes either forward's lse.
#include <cuda_bf16.h>

#include "ops/attention/cuda.cuh"
#include "ops/attention/cudnn_attention.cuh"
#include "ops/attention/cudnn_sdpa.cuh"
#include "ops/backend/cuda_backend.hpp"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;

// dst[t, h, c] (packed, heads of dim features) = src at t * row + h * head + c, rounded to bfloat16.
__global__ void stage_kernel(HeadInput src, size_t row, size_t head, int heads, int dim, size_t n,
                             __nv_bfloat16* __restrict__ dst) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t c = i % dim, h = i / dim % heads, t = i / (size_t(dim) * heads);
    dst[i] = __float2bfloat16_rn(src.value(t * row + h * head + c));
  }
}

// The inverse: dst at t * row + h * head + c = src[t, h, c].
__global__ void unstage_kernel(const __nv_bfloat16* __restrict__ src, size_t row, size_t head, int heads, int dim,
                               size_t n, float* __restrict__ dst) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t c = i % dim, h = i / dim % heads, t = i / (size_t(dim) * heads);
    dst[t * row + h * head + c] = __bfloat162float(src[i]);
  }
}

unsigned blocks_for(const DeviceState* st, size_t n) {
  const size_t cap = size_t(st->sm_count > 0 ? st->sm_count : 1) * 16, want = (n + kThreads - 1) / kThreads;
  return unsigned(want < cap ? want : cap);
}

// One operand of `heads` heads of `dim` features for `tokens` tokens, laid out as `at`.
struct Operand {
  HeadStrides at;
  int heads, dim;
  size_t count(size_t tokens) const { return tokens * heads * dim; }
};

void stage(DeviceState* st, HeadInput src, const Operand& o, size_t tokens, __nv_bfloat16* dst) {
  const HeadStrides p = packed_or(o.at, o.heads, o.dim);
  const size_t n = o.count(tokens);
  stage_kernel<<<blocks_for(st, n), kThreads, 0, st->stream>>>(src, p.row, p.head, o.heads, o.dim, n, dst);
  MT_CUDA_CHECK_LAUNCH();
}

void unstage(DeviceState* st, const __nv_bfloat16* src, const Operand& o, size_t tokens, float* dst) {
  const HeadStrides p = packed_or(o.at, o.heads, o.dim);
  const size_t n = o.count(tokens);
  unstage_kernel<<<blocks_for(st, n), kThreads, 0, st->stream>>>(src, p.row, p.head, o.heads, o.dim, n, dst);
  MT_CUDA_CHECK_LAUNCH();
}

// Consecutive 256-byte-aligned pieces of one scratch buffer: bf16 operands, then cuDNN's workspace.
class Pieces {
 public:
  size_t add(size_t bytes) {
    const size_t at = total_;
    total_ += (bytes + 255) / 256 * 256;
    return at;
  }
  size_t total() const { return total_; }

 private:
  size_t total_ = 0;
};

// Whether cuDNN runs key: false for the own kernels; throws when cuDNN was required and cannot.
bool on_cudnn(DeviceState* st, const SdpaKey& key, bool bf16, long long* workspace) {
  if (st->attention == AttentionImpl::own) return false;
  const std::string missing = bf16 ? cudnn_attention_missing() : "";
  std::string unsupported;
  if (bf16 && missing.empty()) *workspace = sdpa_prepare(st, key, &unsupported);
  const AttentionRoute r = choose_attention(st->attention, bf16, missing, unsupported);
  if (r.error)
    throw UserError("attention " + sdpa_key_text(key) + " was asked to run on cuDNN (precision.attention = " +
                    "\"cudnn\"), but " + r.why + "; set it to \"auto\" to run the own kernels where cuDNN cannot");
  return r.cudnn;
}

SdpaKey key_of(int batch, int heads, int kv_heads, int seq, int qk_dim, int v_dim, float scale, bool backward) {
  return {batch, heads, kv_heads > 0 ? kv_heads : heads, seq, qk_dim, v_dim, scale, backward};
}

}  // namespace

bool cudnn_attention_forward(DeviceState* st, const AttentionForwardArgs& a) {
  const SdpaKey key = key_of(a.batch, a.heads, a.kv_heads, a.seq, a.qk_dim, a.v_dim, a.scale, false);
  long long workspace = 0;
  if (!on_cudnn(st, key, a.inputs != GemmPrecision::fp32, &workspace)) return false;
  const size_t tokens = size_t(a.batch) * a.seq;
  const Operand q{a.q_at, key.heads, key.qk_dim}, k{a.k_at, key.kv_heads, key.qk_dim}, v{a.v_at, key.kv_heads,
                                                                                          key.v_dim};
  const Operand o{a.out_at, key.heads, key.v_dim};
  Pieces p;
  const size_t at_q = p.add(q.count(tokens) * 2), at_k = p.add(k.count(tokens) * 2), at_v = p.add(v.count(tokens) * 2);
  const size_t at_o = p.add(o.count(tokens) * 2), at_w = p.add(size_t(workspace));
  auto* base = static_cast<char*>(scratch(st, kScratchAttention, p.total()));
  auto* bq = reinterpret_cast<__nv_bfloat16*>(base + at_q);
  auto* bk = reinterpret_cast<__nv_bfloat16*>(base + at_k);
  auto* bv = reinterpret_cast<__nv_bfloat16*>(base + at_v);
  auto* bo = reinterpret_cast<__nv_bfloat16*>(base + at_o);
  stage(st, head_input(a.q, a.q_bf16), q, tokens, bq);
  stage(st, head_input(a.k, a.k_bf16), k, tokens, bk);
  stage(st, head_input(a.v, a.v_bf16), v, tokens, bv);
  sdpa_run(st, key, {.q = bq, .k = bk, .v = bv, .o = bo, .lse = a.lse}, base + at_w);
  unstage(st, bo, o, tokens, a.out);
  return true;
}

bool cudnn_attention_backward(DeviceState* st, const AttentionBackwardArgs& a) {
  const SdpaKey key = key_of(a.batch, a.heads, a.kv_heads, a.seq, a.qk_dim, a.v_dim, a.scale, true);
  long long workspace = 0;
  if (!on_cudnn(st, key, a.inputs != GemmPrecision::fp32, &workspace)) return false;
  const size_t tokens = size_t(a.batch) * a.seq;
  const Operand q{a.q_at, key.heads, key.qk_dim}, k{a.k_at, key.kv_heads, key.qk_dim}, v{a.v_at, key.kv_heads,
                                                                                          key.v_dim};
  const Operand o{a.out_at, key.heads, key.v_dim}, dq{a.dq_at, key.heads, key.qk_dim};
  const Operand dk{a.dk_at, key.kv_heads, key.qk_dim}, dv{a.dv_at, key.kv_heads, key.v_dim};
  Pieces p;
  const size_t at_q = p.add(q.count(tokens) * 2), at_k = p.add(k.count(tokens) * 2), at_v = p.add(v.count(tokens) * 2);
  const size_t at_o = p.add(o.count(tokens) * 2), at_do = p.add(o.count(tokens) * 2);
  const size_t at_dq = p.add(dq.count(tokens) * 2), at_dk = p.add(dk.count(tokens) * 2);
  const size_t at_dv = p.add(dv.count(tokens) * 2), at_w = p.add(size_t(workspace));
  auto* base = static_cast<char*>(scratch(st, kScratchAttention, p.total()));
  auto piece = [&](size_t at) { return reinterpret_cast<__nv_bfloat16*>(base + at); };
  stage(st, head_input(a.q, a.q_bf16), q, tokens, piece(at_q));
  stage(st, head_input(a.k, a.k_bf16), k, tokens, piece(at_k));
  stage(st, head_input(a.v, a.v_bf16), v, tokens, piece(at_v));
  stage(st, head_input(a.out, nullptr), o, tokens, piece(at_o));
  stage(st, head_input(a.dout, nullptr), o, tokens, piece(at_do));
  sdpa_run(st, key, {.q = piece(at_q), .k = piece(at_k), .v = piece(at_v), .o = piece(at_o),
                     .lse = const_cast<float*>(a.lse), .dout = piece(at_do), .dq = piece(at_dq), .dk = piece(at_dk),
                     .dv = piece(at_dv)}, base + at_w);
  unstage(st, piece(at_dq), dq, tokens, a.dq);
  unstage(st, piece(at_dk), dk, tokens, a.dk);
  unstage(st, piece(at_dv), dv, tokens, a.dv);
  return true;
}

}  // namespace mt::cuda

namespace mt {

std::string cuda_attention_note(const Backend& gpu) {
  if (gpu.state->attention == AttentionImpl::own) return "own kernels (precision.attention = \"own\")";
  const std::string missing = cuda::cudnn_attention_missing();
  if (!missing.empty()) return "own kernels (" + missing + ")";
  return cuda::cudnn_attention_library() + " where it runs the shape, else the own kernels";
}

std::string cuda_attention_shapes(const Backend& gpu) { return cuda::sdpa_shapes(gpu.state); }

}  // namespace mt
