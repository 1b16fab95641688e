#pragma once
// What the two attention implementations share: attention.cu (CUDA cores, fp32 products, any head
// dims) and cuda_tc.cu (tensor cores, bf16 products, the head dims it is built for). Both lay
// their blocks out the same way: one per (tile, sequence and head), numbered along grid.x only
// (limit 2^31 - 1) so that any number of sequences and heads fits.
#include <cuda_bf16.h>

#include <climits>
#include <string>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_state.cuh"
#include "util/error.hpp"

namespace mt::cuda {

// Where one operand's heads live (HeadStrides, 0s filled in): (token t, head h) starts at
// t * row + (h / group) * head, group > 1 for grouped-query keys and values.
struct HeadLayout {
  size_t row, head;
  int group;
};
inline HeadLayout head_layout(HeadStrides at, int heads, int dim, int group) {
  const HeadStrides p = packed_or(at, heads, dim);
  return {size_t(p.row), size_t(p.head), group};
}

// One call's sizes, passed by value to every kernel. `tiles`: tiles of the kernel family's
// height along the sequence; `bf16`: products take bfloat16-rounded inputs. The layouts of q, k,
// v, out (and dout), dq, dk, dv: forward leaves the gradients' unset.
struct AttentionShape {
  int batch, seq, heads, qk_dim, v_dim, tiles;
  float scale;
  bool bf16;
  HeadLayout q, k, v, o, dq, dk, dv;
};

// The shape of a call, `tile` rows per tile.
inline AttentionShape attention_shape(const AttentionForwardArgs& a, int tile) {
  const int kv = a.kv_heads > 0 ? a.kv_heads : a.heads, group = a.heads / kv;
  MT_CHECK(a.heads % kv == 0);
  AttentionShape s{a.batch, a.seq, a.heads, a.qk_dim, a.v_dim, (a.seq + tile - 1) / tile, a.scale,
                   a.inputs != GemmPrecision::fp32, {}, {}, {}, {}, {}, {}, {}};
  s.q = head_layout(a.q_at, a.heads, a.qk_dim, 1);
  s.k = head_layout(a.k_at, kv, a.qk_dim, group);
  s.v = head_layout(a.v_at, kv, a.v_dim, group);
  s.o = head_layout(a.out_at, a.heads, a.v_dim, 1);
  return s;
}
inline AttentionShape attention_shape(const AttentionBackwardArgs& a, int tile) {
  AttentionShape s = attention_shape(AttentionForwardArgs{.batch = a.batch, .seq = a.seq, .heads = a.heads,
      .qk_dim = a.qk_dim, .v_dim = a.v_dim, .scale = a.scale, .inputs = a.inputs, .kv_heads = a.kv_heads,
      .q_at = a.q_at, .k_at = a.k_at, .v_at = a.v_at, .out_at = a.out_at}, tile);
  s.dq = head_layout(a.dq_at, a.heads, a.qk_dim, 1);
  s.dk = head_layout(a.dk_at, a.heads / s.k.group, a.qk_dim, s.k.group);
  s.dv = head_layout(a.dv_at, a.heads / s.k.group, a.v_dim, s.k.group);
  return s;
}

// A [batch*seq, heads, dim] input of the products: fp32, or kept in bfloat16 (a k or v under bf16
// activations). Kernels read element i through value(), offsets added to the index.
struct HeadInput {
  const float* f32 = nullptr;
  const __nv_bfloat16* bf16 = nullptr;
  __device__ float value(size_t i) const { return bf16 ? __bfloat162float(bf16[i]) : f32[i]; }
};
inline HeadInput head_input(const float* x, const Bf16* x16) {
  return {x16 ? nullptr : x, reinterpret_cast<const __nv_bfloat16*>(x16)};
}

struct TilePlace {
  int bh;    // b * heads + h
  int tile;  // 0 = the first tile along the sequence
};

// This block's head and tile. Query-tile kernels count tiles from the sequence end (the last
// query tile sees every key tile), key-tile kernels from its start (the first key tile is seen by
// every query tile): either way the longest blocks come first.
__device__ inline TilePlace tile_place(const AttentionShape& s, bool from_end) {
  const unsigned bh_count = unsigned(s.batch) * unsigned(s.heads);
  const int t = int(blockIdx.x / bh_count);
  return {int(blockIdx.x % bh_count), from_end ? s.tiles - 1 - t : t};
}

// Offset of (sequence b, position 0, query head h; bh = b * heads + h) in an operand laid out as l.
__device__ inline size_t head_start(const AttentionShape& s, const HeadLayout& l, int bh) {
  const int b = bh / s.heads, h = bh % s.heads;
  return size_t(b) * s.seq * l.row + size_t(h / l.group) * l.head;
}

// Per-row values of one head ([batch, heads, seq] layout) for `rows` rows from row0; 0 past the end.
__device__ inline void load_row_values(float* __restrict__ dst, const float* __restrict__ src, const AttentionShape& s,
                                       int bh, int row0, int rows) {
  for (int r = threadIdx.x; r < rows; r += blockDim.x)
    dst[r] = row0 + r < s.seq ? src[size_t(bh) * s.seq + row0 + r] : 0.0f;
}

// Blocks of a tile-per-block launch.
inline unsigned tile_blocks(const AttentionShape& s) {
  const long long blocks = (long long)s.tiles * s.batch * s.heads;
  MT_CHECK(blocks <= INT_MAX);
  return unsigned(blocks);
}

// Allows `kernel` the shared memory it needs beyond the default 48 KiB, or stops with the head
// sizes that do not fit (the tiles hold whole head vectors).
template <typename Kernel>
void allow_shared(DeviceState* st, Kernel* kernel, size_t bytes, const AttentionShape& s) {
  int limit = 0;
  MT_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, st->device));
  if (bytes > size_t(limit))
    throw UserError("attention with qk head dim " + std::to_string(s.qk_dim) + " and v head dim " +
                    std::to_string(s.v_dim) + " needs " + std::to_string(bytes) +
                    " bytes of shared memory per block on the GPU, but this GPU allows " + std::to_string(limit) +
                    "; use smaller head dims (256 and 256 fit on Hopper)");
  MT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

// The tensor-core kernels (cuda_tc.cu). Each returns false, doing nothing, for head dims it
// is not built for. Backward takes D = rowsum(dout * out) from attention.cu's delta kernel.
bool attention_tc_forward(DeviceState* st, const AttentionForwardArgs& a);
// Takes the shape to run (its dk and dv layouts may be a scratch's, see cuda.cu).
bool attention_tc_backward(DeviceState* st, const AttentionBackwardArgs& a, const AttentionShape& s,
                           const float* delta, float* dk, float* dv);

// QK-Clip's per-head maxima of a forward (AttentionForwardArgs::max_logit), a pass of its own
// (qk_clip_cuda.cu).
void attention_max_logit(DeviceState* st, const AttentionForwardArgs& a);

}  // namespace mt::cuda
