// The attention ops through cuDNN (cudnn_sdpa.cu) where the backend's choice (cudnn_choice.hpp) says so:
// q, k, v (and out, dout for backward) are staged into packed bfloat16 in the attention scratch, cuDNN
// runs the shape's graph there, and out (or dq, dk, dv) come back to fp32 in the caller's layout. lse is
// cuDNN's statistics tensor, written in place: the log-sum-exp of the scaled scores in the [batch, heads,
// seq] layout the own backward reads, so either backward takes either forward's lse.
#include <cuda_bf16.h>

#include <array>
#include <optional>

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

// Consecutive 256-byte-aligned pieces of the attention scratch: one bf16 buffer per operand of `counts`
// elements, then cuDNN's workspace (the last piece).
template <size_t N>
std::array<__nv_bfloat16*, N + 1> carve(DeviceState* st, const std::array<size_t, N>& counts, long long workspace) {
  std::array<size_t, N + 1> at{};
  size_t total = 0;
  for (size_t i = 0; i <= N; ++i) {
    at[i] = total;
    total += ((i < N ? counts[i] * sizeof(__nv_bfloat16) : size_t(workspace)) + 255) / 256 * 256;
  }
  auto* base = static_cast<char*>(scratch(st, kScratchAttention, total));
  std::array<__nv_bfloat16*, N + 1> pieces;
  for (size_t i = 0; i <= N; ++i) pieces[i] = reinterpret_cast<__nv_bfloat16*>(base + at[i]);
  return pieces;
}

// q, k and v of a call: where they are, and their heads and widths.
struct Inputs {
  Operand q, k, v;
  HeadInput q_in, k_in, v_in;
};
template <typename Args>
Inputs inputs_of(const Args& a, const SdpaKey& key) {
  return {{a.q_at, key.heads, key.qk_dim}, {a.k_at, key.kv_heads, key.qk_dim}, {a.v_at, key.kv_heads, key.v_dim},
          head_input(a.q, a.q_bf16), head_input(a.k, a.k_bf16), head_input(a.v, a.v_bf16)};
}
void stage_inputs(DeviceState* st, const Inputs& in, size_t tokens, __nv_bfloat16* q, __nv_bfloat16* k,
                  __nv_bfloat16* v) {
  stage(st, in.q_in, in.q, tokens, q);
  stage(st, in.k_in, in.k, tokens, k);
  stage(st, in.v_in, in.v, tokens, v);
}

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

// A call cuDNN runs: its shape, workspace bytes, tokens and inputs.
struct Call {
  SdpaKey key;
  long long workspace = 0;
  size_t tokens = 0;
  Inputs in;
};
// a's call on cuDNN, or nullopt when the own kernels run it.
template <typename Args>
std::optional<Call> cudnn_call(DeviceState* st, const Args& a, bool backward) {
  Call c;
  c.key = {a.batch, a.heads, a.kv_heads > 0 ? a.kv_heads : a.heads, a.seq, a.qk_dim, a.v_dim, a.scale, backward};
  if (!on_cudnn(st, c.key, a.inputs != GemmPrecision::fp32, &c.workspace)) return std::nullopt;
  c.tokens = size_t(a.batch) * a.seq;
  c.in = inputs_of(a, c.key);
  return c;
}

}  // namespace

bool cudnn_attention_forward(DeviceState* st, const AttentionForwardArgs& a) {
  const std::optional<Call> c = cudnn_call(st, a, false);
  if (!c) return false;
  const Operand o{a.out_at, c->key.heads, c->key.v_dim};
  const size_t n = c->tokens;
  const auto b = carve<4>(st, {c->in.q.count(n), c->in.k.count(n), c->in.v.count(n), o.count(n)}, c->workspace);
  stage_inputs(st, c->in, n, b[0], b[1], b[2]);
  sdpa_run(st, c->key, {.q = b[0], .k = b[1], .v = b[2], .o = b[3], .lse = a.lse}, b[4]);
  unstage(st, b[3], o, n, a.out);
  return true;
}

bool cudnn_attention_backward(DeviceState* st, const AttentionBackwardArgs& a) {
  const std::optional<Call> c = cudnn_call(st, a, true);
  if (!c) return false;
  const SdpaKey& k = c->key;
  const Operand o{a.out_at, k.heads, k.v_dim}, dq{a.dq_at, k.heads, k.qk_dim};
  const Operand dk{a.dk_at, k.kv_heads, k.qk_dim}, dv{a.dv_at, k.kv_heads, k.v_dim};
  const size_t n = c->tokens;
  const auto b = carve<8>(st, {c->in.q.count(n), c->in.k.count(n), c->in.v.count(n), o.count(n), o.count(n),
                               dq.count(n), dk.count(n), dv.count(n)}, c->workspace);
  stage_inputs(st, c->in, n, b[0], b[1], b[2]);
  stage(st, head_input(a.out, nullptr), o, n, b[3]);
  stage(st, head_input(a.dout, nullptr), o, n, b[4]);
  sdpa_run(st, k, {.q = b[0], .k = b[1], .v = b[2], .o = b[3], .lse = const_cast<float*>(a.lse), .dout = b[4],
                   .dq = b[5], .dk = b[6], .dv = b[7]}, b[8]);
  unstage(st, b[5], dq, n, a.dq);
  unstage(st, b[6], dk, n, a.dk);
  unstage(st, b[7], dv, n, a.dv);
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
