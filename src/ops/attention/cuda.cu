// Causal attention on the GPU, flash style: no [seq, seq] matrix exists, not even per head. A
// block owns one tile of kTile rows of one (sequence, head) and streams the other side's tiles
// through shared memory:
//   forward   one block per query tile; online softmax over the key tiles at or before it
//             (src/ops/attention/online_softmax.hpp); writes out and lse.
//   backward  D = rowsum(dout * out) per query row; one block per key tile accumulates dK and dV
//             over the query tiles at or after it; one block per query tile accumulates dQ over
//             the key tiles at or before it. Both recompute the probabilities from lse. Every
//             output element has one writer and a fixed summation order: no atomics, so results
//             are the same bit for bit run to run.
// With bf16 inputs the products see bfloat16-rounded q, k, v, dout, probabilities and score
// gradients (fp32 arithmetic otherwise), as the CPU reference does; the head dims that
// cuda_tc.cu is built for go to its tensor-core kernels instead, and every shape that cuDNN's fused
// attention runs goes there first (cudnn_attention.cu).
#include <cuda_bf16.h>

#include "ops/attention/cuda.cuh"
#include "ops/attention/cudnn_attention.cuh"
#include "ops/fp8/row_codes.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/attention/online_softmax.hpp"

namespace mt::cuda {

namespace {

constexpr int kTile = 32;  // rows of a query tile and of a key tile: one key per lane in the row steps
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = kTile / kWarps;
static_assert(kTile == 32 && kTile % kWarps == 0, "row steps map the keys of a tile onto the lanes of a warp");

using Shape = AttentionShape;

// Shared tiles of qk_dim or v_dim features use a row stride of dim + 1: when the lanes of a warp
// read one feature of 32 different rows, the odd stride puts them in 32 different banks.
__host__ __device__ int padded(int dim) { return dim + 1; }

// A value as the products take it: rounded to bfloat16 under bf16 inputs.
__device__ float product_input(const Shape& s, float x) {
  return s.bf16 ? __bfloat162float(__float2bfloat16_rn(x)) : x;
}

__device__ float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Butterfly sum: every lane adds the same pairs, so every lane ends with the same bits.
__device__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ float dot(const float* a, const float* b, int n) {
  float acc = 0.0f;
  for (int d = 0; d < n; ++d) acc += a[d] * b[d];
  return acc;
}

// Rows row0 .. row0 + kTile - 1 of one head (starting at element `at`, global row stride ld) into a
// shared tile, as the products take them. Rows past the sequence end are zero: they meet
// probability 0 in products, and 0 * garbage could be NaN.
__device__ void load_tile(const Shape& s, float* __restrict__ dst, const HeadInput& src, size_t at, size_t ld, int row0,
                          int dim) {
  const int lds = padded(dim);
  for (int e = threadIdx.x; e < kTile * dim; e += kThreads) {
    const int r = e / dim, c = e - r * dim;
    dst[r * lds + c] = row0 + r < s.seq ? product_input(s, src.value(at + size_t(row0 + r) * ld + c)) : 0.0f;
  }
}

__global__ void __launch_bounds__(kThreads)
    forward_kernel(Shape s, HeadInput q, HeadInput k, HeadInput v,
                   float* __restrict__ out, float* __restrict__ lse) {
  extern __shared__ float smem[];
  const int lq = padded(s.qk_dim), lv = padded(s.v_dim);
  float* sq = smem;                   // [kTile][lq] this block's queries
  float* sk = sq + kTile * lq;        // [kTile][lq] current key tile
  float* sv = sk + kTile * lq;        // [kTile][lv] current value tile
  float* acc = sv + kTile * lv;       // [kTile][lv] unnormalised output
  float* sp = acc + kTile * lv;       // [kTile][kTile] weights of the current key tile
  float* alpha = sp + kTile * kTile;  // [kTile] rescale factor of acc for the current key tile

  const TilePlace pl = tile_place(s, true);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, q0 = pl.tile * kTile;
  const size_t hk = head_start(s, s.k, pl.bh), hv = head_start(s, s.v, pl.bh);
  load_tile(s, sq, q, head_start(s, s.q, pl.bh), s.q.row, q0, s.qk_dim);
  for (int e = threadIdx.x; e < kTile * lv; e += kThreads) acc[e] = 0.0f;

  // Warp w owns rows w, w + kWarps, ...; every lane holds the same copy of its rows' state.
  OnlineSoftmax row[kRowsPerWarp];
  for (int kt = 0; kt <= pl.tile; ++kt) {
    const int k0 = kt * kTile;
    __syncthreads();  // the previous key tile is no longer read
    load_tile(s, sk, k, hk, s.k.row, k0, s.qk_dim);
    load_tile(s, sv, v, hv, s.v.row, k0, s.v_dim);
    __syncthreads();
#pragma unroll
    for (int n = 0; n < kRowsPerWarp; ++n) {
      const int r = warp + n * kWarps, i = q0 + r, j = k0 + lane;
      const float score = i < s.seq && j <= i ? s.scale * dot(sq + r * lq, sk + lane * lq, s.qk_dim) : -INFINITY;
      const float a = row[n].rescale(warp_max(score));
      const float p = row[n].weight(score);
      row[n].add(warp_sum(p));
      sp[r * kTile + lane] = product_input(s, p);
      if (lane == 0) alpha[r] = a;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < kTile * s.v_dim; e += kThreads) {
      const int r = e / s.v_dim, c = e - r * s.v_dim;
      float o = acc[r * lv + c] * alpha[r];
      for (int j = 0; j < kTile; ++j) o += sp[r * kTile + j] * sv[j * lv + c];
      acc[r * lv + c] = o;
    }
  }
  __syncthreads();  // acc rows were updated by other warps than the ones that own the rows
  const size_t ho = head_start(s, s.o, pl.bh);

#pragma unroll
  for (int n = 0; n < kRowsPerWarp; ++n) {
    const int r = warp + n * kWarps, i = q0 + r;
    if (i >= s.seq) continue;
    if (lane == 0) lse[size_t(pl.bh) * s.seq + i] = row[n].lse();
    for (int c = lane; c < s.v_dim; c += 32) out[ho + size_t(i) * s.o.row + c] = row[n].normalise(acc[r * lv + c]);
  }
}

// D = dout . out for each (row, head) of the [batch*seq, heads, v_dim] view, one warp each,
// stored [batch, heads, seq] like lse.
__global__ void __launch_bounds__(kThreads)
    delta_kernel(Shape s, const float* __restrict__ dout, const float* __restrict__ out, float* __restrict__ delta) {
  const size_t w = size_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (w >= size_t(s.batch) * s.seq * s.heads) return;  // whole warps leave together
  const size_t token = w / s.heads, b = token / s.seq;
  const int h = int(w % s.heads), i = int(token % s.seq);
  const size_t at = token * s.o.row + h * s.o.head;
  float acc = 0.0f;
  for (int c = lane; c < s.v_dim; c += 32) acc += dout[at + c] * out[at + c];
  acc = warp_sum(acc);
  if (lane == 0) delta[(b * s.heads + h) * s.seq + i] = acc;
}

// acc[j][c] += sum over r of a[r][j] * b[r][c] for a [kTile][kTile] tile `a` (a transposed product).
// Thread e always owns the same accumulator elements, so calls need no synchronisation among them.
__device__ void add_transposed_product(float* acc, int lacc, const float* a, const float* b, int lb, int cols) {
  for (int e = threadIdx.x; e < kTile * cols; e += kThreads) {
    const int j = e / cols, c = e - j * cols;
    float sum = acc[j * lacc + c];
    for (int r = 0; r < kTile; ++r) sum += a[r * kTile + j] * b[r * lb + c];
    acc[j * lacc + c] = sum;
  }
}

// acc[r][c] += sum over j of a[r][j] * b[j][c] for a [kTile][kTile] tile `a`.
__device__ void add_product(float* acc, int lacc, const float* a, const float* b, int lb, int cols) {
  for (int e = threadIdx.x; e < kTile * cols; e += kThreads) {
    const int r = e / cols, c = e - r * cols;
    float sum = acc[r * lacc + c];
    for (int j = 0; j < kTile; ++j) sum += a[r * kTile + j] * b[j * lb + c];
    acc[r * lacc + c] = sum;
  }
}

// Rows row0.. of a [kTile][ltile] tile to a head's rows in global memory, those inside the sequence.
__device__ void store_rows(float* __restrict__ head, size_t ld, const float* tile, int ltile, int row0, int seq,
                           int cols) {
  for (int e = threadIdx.x; e < kTile * cols; e += kThreads) {
    const int r = e / cols, c = e - r * cols;
    if (row0 + r < seq) head[size_t(row0 + r) * ld + c] = tile[r * ltile + c];
  }
}

// For query rows q0.. and key rows k0.. (warp-owned rows, one key per lane): the probability
// p = exp(scale q.k - lse) into sp (when given) and ds = p (dout.v - D) scale into sds, both 0
// where masked.
__device__ void score_grads(const Shape& s, int q0, int k0, const float* sq, const float* sdo, const float* slse,
                            const float* sdelta, const float* sk, const float* sv, float* sp, float* sds) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int lq = padded(s.qk_dim), lv = padded(s.v_dim);
  for (int r = warp; r < kTile; r += kWarps) {
    const int i = q0 + r, j = k0 + lane;
    float p = 0.0f, ds = 0.0f;
    if (i < s.seq && j <= i) {
      p = softmax_prob(s.scale * dot(sq + r * lq, sk + lane * lq, s.qk_dim), slse[r]);
      ds = p * (dot(sdo + r * lv, sv + lane * lv, s.v_dim) - sdelta[r]) * s.scale;
    }
    if (sp) sp[r * kTile + lane] = product_input(s, p);
    sds[r * kTile + lane] = product_input(s, ds);
  }
}

// dV = P^T dO and dK = dS^T Q for one key tile, summed over the query tiles at or after it.
__global__ void __launch_bounds__(kThreads)
    key_grads_kernel(Shape s, HeadInput q, HeadInput k, HeadInput v,
                     const float* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ delta,
                     float* __restrict__ dk, float* __restrict__ dv) {
  extern __shared__ float smem[];
  const int lq = padded(s.qk_dim), lv = padded(s.v_dim);
  float* sk = smem;                   // [kTile][lq] this block's keys
  float* sv = sk + kTile * lq;        // [kTile][lv] this block's values
  float* adk = sv + kTile * lv;       // [kTile][lq] dK accumulator
  float* adv = adk + kTile * lq;      // [kTile][lv] dV accumulator
  float* sq = adv + kTile * lv;       // [kTile][lq] current query tile
  float* sdo = sq + kTile * lq;       // [kTile][lv] current output-gradient tile
  float* sp = sdo + kTile * lv;       // [kTile][kTile] probabilities, [query][key]
  float* sds = sp + kTile * kTile;    // [kTile][kTile] score gradients, [query][key]
  float* slse = sds + kTile * kTile;  // [kTile]
  float* sdelta = slse + kTile;       // [kTile]

  const TilePlace pl = tile_place(s, false);
  const int k0 = pl.tile * kTile;
  const size_t hq = head_start(s, s.q, pl.bh), ho = head_start(s, s.o, pl.bh);
  load_tile(s, sk, k, head_start(s, s.k, pl.bh), s.k.row, k0, s.qk_dim);
  load_tile(s, sv, v, head_start(s, s.v, pl.bh), s.v.row, k0, s.v_dim);
  for (int e = threadIdx.x; e < kTile * lq; e += kThreads) adk[e] = 0.0f;
  for (int e = threadIdx.x; e < kTile * lv; e += kThreads) adv[e] = 0.0f;

  for (int qt = pl.tile; qt < s.tiles; ++qt) {
    const int q0 = qt * kTile;
    __syncthreads();  // the previous query tile is no longer read
    load_tile(s, sq, q, hq, s.q.row, q0, s.qk_dim);
    load_tile(s, sdo, {dout, nullptr}, ho, s.o.row, q0, s.v_dim);
    load_row_values(slse, lse, s, pl.bh, q0, kTile);
    load_row_values(sdelta, delta, s, pl.bh, q0, kTile);
    __syncthreads();
    score_grads(s, q0, k0, sq, sdo, slse, sdelta, sk, sv, sp, sds);
    __syncthreads();
    add_transposed_product(adv, lv, sp, sdo, lv, s.v_dim);   // dV += P^T dO
    add_transposed_product(adk, lq, sds, sq, lq, s.qk_dim);  // dK += dS^T Q
  }
  store_rows(dv + head_start(s, s.dv, pl.bh), s.dv.row, adv, lv, k0, s.seq, s.v_dim);
  store_rows(dk + head_start(s, s.dk, pl.bh), s.dk.row, adk, lq, k0, s.seq, s.qk_dim);
}

// dQ = dS K for one query tile, summed over the key tiles at or before it.
__global__ void __launch_bounds__(kThreads)
    query_grads_kernel(Shape s, HeadInput q, HeadInput k, HeadInput v,
                       const float* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ delta,
                       float* __restrict__ dq) {
  extern __shared__ float smem[];
  const int lq = padded(s.qk_dim), lv = padded(s.v_dim);
  float* sq = smem;                   // [kTile][lq] this block's queries
  float* sdo = sq + kTile * lq;       // [kTile][lv] this block's output gradients
  float* adq = sdo + kTile * lv;      // [kTile][lq] dQ accumulator
  float* sk = adq + kTile * lq;       // [kTile][lq] current key tile
  float* sv = sk + kTile * lq;        // [kTile][lv] current value tile
  float* sds = sv + kTile * lv;       // [kTile][kTile] score gradients, [query][key]
  float* slse = sds + kTile * kTile;  // [kTile]
  float* sdelta = slse + kTile;       // [kTile]

  const TilePlace pl = tile_place(s, true);
  const int q0 = pl.tile * kTile;
  const size_t hk = head_start(s, s.k, pl.bh), hv = head_start(s, s.v, pl.bh);
  load_tile(s, sq, q, head_start(s, s.q, pl.bh), s.q.row, q0, s.qk_dim);
  load_tile(s, sdo, {dout, nullptr}, head_start(s, s.o, pl.bh), s.o.row, q0, s.v_dim);
  load_row_values(slse, lse, s, pl.bh, q0, kTile);
  load_row_values(sdelta, delta, s, pl.bh, q0, kTile);
  for (int e = threadIdx.x; e < kTile * lq; e += kThreads) adq[e] = 0.0f;

  for (int kt = 0; kt <= pl.tile; ++kt) {
    const int k0 = kt * kTile;
    __syncthreads();  // the previous key tile is no longer read
    load_tile(s, sk, k, hk, s.k.row, k0, s.qk_dim);
    load_tile(s, sv, v, hv, s.v.row, k0, s.v_dim);
    __syncthreads();
    score_grads(s, q0, k0, sq, sdo, slse, sdelta, sk, sv, nullptr, sds);
    __syncthreads();
    add_product(adq, lq, sds, sk, lq, s.qk_dim);  // dQ += dS K
  }
  store_rows(dq + head_start(s, s.dq, pl.bh), s.dq.row, adq, lq, q0, s.seq, s.qk_dim);
}

// Grouped key/value heads: the sum over a group's query heads, in head order (the CPU's order),
// from per-query-head gradients `each` ([batch*seq, heads, dim], packed) into dst laid out as l.
__global__ void group_sum_kernel(Shape s, int dim, const float* __restrict__ each, HeadLayout l,
                                 float* __restrict__ dst) {
  const size_t kv = size_t(s.heads / l.group), n = size_t(s.batch) * s.seq * kv * dim;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t c = i % dim, g = (i / dim) % kv, token = i / (dim * kv);
    const float* src = each + (token * s.heads + g * l.group) * dim + c;
    float sum = src[0];
    for (int h = 1; h < l.group; ++h) sum += src[size_t(h) * dim];
    dst[token * l.row + g * l.head + c] = sum;
  }
}

void group_sum(DeviceState* st, const Shape& s, int dim, const float* each, HeadLayout l, float* dst) {
  const size_t n = size_t(s.batch) * s.seq * (s.heads / l.group) * dim;
  const size_t cap = size_t(st->sm_count > 0 ? st->sm_count : 1) * 16, want = (n + kThreads - 1) / kThreads;
  group_sum_kernel<<<unsigned(want < cap ? want : cap), kThreads, 0, st->stream>>>(s, dim, each, l, dst);
  MT_CUDA_CHECK_LAUNCH();
}

// Shared bytes of each kernel, from the tile layouts above.
size_t forward_bytes(const Shape& s) {
  return sizeof(float) * (2 * kTile * padded(s.qk_dim) + 2 * kTile * padded(s.v_dim) + kTile * kTile + kTile);
}
size_t key_grads_bytes(const Shape& s) {
  return sizeof(float) * (3 * kTile * padded(s.qk_dim) + 3 * kTile * padded(s.v_dim) + 2 * kTile * kTile + 2 * kTile);
}
size_t query_grads_bytes(const Shape& s) {
  return sizeof(float) * (3 * kTile * padded(s.qk_dim) + 2 * kTile * padded(s.v_dim) + kTile * kTile + 2 * kTile);
}

}  // namespace

namespace {

// The forward through cuDNN, the tensor-core kernel or the CUDA-core one, the first that takes it.
void run_forward(DeviceState* st, const AttentionForwardArgs& a) {
  if (cudnn_attention_forward(st, a)) return;
  if (a.inputs != GemmPrecision::fp32 && attention_tc_forward(st, a)) return;
  const Shape s = attention_shape(a, kTile);
  const size_t bytes = forward_bytes(s);
  allow_shared(st, forward_kernel, bytes, s);
  forward_kernel<<<tile_blocks(s), kThreads, bytes, st->stream>>>(
      s, head_input(a.q, a.q_bf16), head_input(a.k, a.k_bf16), head_input(a.v, a.v_bf16), a.out, a.lse);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace

// out's FP8 codes (out_fp8) in one pass after the kernel: a row's 128-wide piece spans several
// heads, which different blocks of every kernel here (and cuDNN) write.
void attention_forward(DeviceState* st, const AttentionForwardArgs& a) {
  if (a.batch == 0 || a.seq == 0 || a.heads == 0) return;
  activate(st);
  MT_CHECK((!a.q_bf16 && !a.k_bf16 && !a.v_bf16) || a.inputs != GemmPrecision::fp32);
  run_forward(st, a);
  if (a.max_logit) attention_max_logit(st, a);
  if (!a.out_fp8.codes) return;
  MT_CHECK(packed_or(a.out_at, a.heads, a.v_dim).row == a.heads * a.v_dim);
  fp8_code_rows(st, a.out, a.batch * a.seq, a.heads * a.v_dim, a.out_fp8);
}

// Grouped-query attention writes each query head's dk and dv into scratch (after delta), then
// sums every group in one kernel per gradient: one writer per element, no atomics.
void attention_backward(DeviceState* st, const AttentionBackwardArgs& a) {
  if (a.batch == 0 || a.seq == 0 || a.heads == 0) return;
  activate(st);
  MT_CHECK((!a.q_bf16 && !a.k_bf16 && !a.v_bf16) || a.inputs != GemmPrecision::fp32);
  if (cudnn_attention_backward(st, a)) return;
  const Shape want = attention_shape(a, kTile);
  const bool grouped = want.k.group > 1;
  const size_t rows = size_t(a.batch) * a.seq * a.heads, delta_floats = (rows + 63) / 64 * 64;
  const size_t dk_floats = grouped ? (rows * a.qk_dim + 63) / 64 * 64 : 0, dv_floats = grouped ? rows * a.v_dim : 0;
  auto* delta = static_cast<float*>(
      scratch(st, kScratchAttention, (delta_floats + dk_floats + dv_floats) * sizeof(float)));
  Shape s = want;
  float* dk = a.dk;
  float* dv = a.dv;
  if (grouped) {
    dk = delta + delta_floats, dv = dk + dk_floats;
    s.dk = {size_t(a.heads) * a.qk_dim, size_t(a.qk_dim), 1};
    s.dv = {size_t(a.heads) * a.v_dim, size_t(a.v_dim), 1};
  }
  const size_t delta_blocks = (rows + kWarps - 1) / kWarps;
  MT_CHECK(delta_blocks <= INT_MAX);
  delta_kernel<<<unsigned(delta_blocks), kThreads, 0, st->stream>>>(s, a.dout, a.out, delta);
  MT_CUDA_CHECK_LAUNCH();
  if (a.inputs == GemmPrecision::fp32 || !attention_tc_backward(st, a, s, delta, dk, dv)) {
    const HeadInput q = head_input(a.q, a.q_bf16), k = head_input(a.k, a.k_bf16), v = head_input(a.v, a.v_bf16);
    const size_t key_bytes = key_grads_bytes(s), query_bytes = query_grads_bytes(s);
    allow_shared(st, key_grads_kernel, key_bytes, s);
    allow_shared(st, query_grads_kernel, query_bytes, s);
    key_grads_kernel<<<tile_blocks(s), kThreads, key_bytes, st->stream>>>(s, q, k, v, a.dout, a.lse, delta, dk, dv);
    MT_CUDA_CHECK_LAUNCH();
    query_grads_kernel<<<tile_blocks(s), kThreads, query_bytes, st->stream>>>(s, q, k, v, a.dout, a.lse, delta,
                                                                              a.dq);
    MT_CUDA_CHECK_LAUNCH();
  }
  if (!grouped) return;
  group_sum(st, s, a.qk_dim, dk, want.dk, a.dk);
  group_sum(st, s, a.v_dim, dv, want.dv, a.dv);
}

}  // namespace mt::cuda
