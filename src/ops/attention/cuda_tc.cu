// Causal attention on tensor cores: the products take bfloat16 inputs and accumulate in fp32
// (WMMA 16x16x16 fragments), for the head dims listed in with_dims(); attention.cu runs the
// others on CUDA cores. The algorithm and its order are attention.cu's: forward is one block per
// query tile with an online softmax over the key tiles at or before it; backward is one block per
// key tile for dK and dV and one per query tile for dQ, recomputing the probabilities from lse,
// with one writer per output element and no atomics (the same bits run to run).
// A tile is 64 rows, and each of the four warps owns 16 of them: the warp computes its rows of
// the scores, turns them into probabilities (two lanes per row, each taking every other column),
// and multiplies on. Only the products that mix rows of different warps (dV = P^T dO and
// dK = dS^T Q) wait for the whole block. The rounding points are the CPU reference's (q, k, v,
// dout, the probabilities, the score gradients); forward rounds the probabilities before the
// division by the row sum, where the reference rounds after it, so the two agree to bfloat16's
// precision rather than fp32's.
#include <cuda_bf16.h>
#include <mma.h>

#include "ops/attention/cuda.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/attention/online_softmax.hpp"

namespace mt::cuda {

namespace {

using namespace nvcuda;
using bf16 = __nv_bfloat16;

constexpr int kRows = 64;  // rows of a query tile and of a key tile
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kF = 16;             // a WMMA fragment's side; a warp's rows of a tile
constexpr int kHalf = kRows / 2;   // columns of a tile row that one lane handles
constexpr int kLdS = kRows + 4;    // row stride of the fp32 score tiles (a multiple of 4, as WMMA needs)
constexpr int kLdP = kRows + 8;    // row stride of the bf16 probability tiles (a multiple of 8)
static_assert(kRows == kWarps * kF, "each warp owns one fragment's height of rows");

using FragA = wmma::fragment<wmma::matrix_a, kF, kF, kF, bf16, wmma::row_major>;
using FragAt = wmma::fragment<wmma::matrix_a, kF, kF, kF, bf16, wmma::col_major>;  // A read transposed
using FragB = wmma::fragment<wmma::matrix_b, kF, kF, kF, bf16, wmma::row_major>;
using FragBt = wmma::fragment<wmma::matrix_b, kF, kF, kF, bf16, wmma::col_major>;  // B read transposed
using FragC = wmma::fragment<wmma::accumulator, kF, kF, kF, float>;

// Shared regions start at multiples of 128 bytes (WMMA wants 32). kernels and byte counts walk
// the same list of regions through one Carver.
struct Carver {
  size_t at = 0;
  template <typename T>
  __host__ __device__ size_t take(size_t count) {
    const size_t start = (at + 127) & ~size_t(127);
    at = start + count * sizeof(T);
    return start;
  }
};

template <int QK, int V>
struct Dims {
  static constexpr int qk = QK, v = V;
  static constexpr int lq = QK + 8, lv = V + 8;  // bf16 row strides of q/k and v/dout tiles
  static constexpr int lo = V + 4;               // fp32 row stride of the output accumulator
  static_assert(QK % kF == 0 && V % kF == 0, "head dims are whole fragments");
};

// Where one (sequence, head) starts in each operand; their row strides are the shape's.
struct HeadView {
  size_t q, k, v, o, dq, dk, dv;
  __device__ HeadView(const AttentionShape& s, int bh)
      : q(head_start(s, s.q, bh)), k(head_start(s, s.k, bh)), v(head_start(s, s.v, bh)), o(head_start(s, s.o, bh)),
        dq(head_start(s, s.dq, bh)), dk(head_start(s, s.dk, bh)), dv(head_start(s, s.dv, bh)) {}
};

// Rows row0 .. row0 + kRows - 1 of one head (from element `at`, global row stride gld) into a bf16
// tile, rounded unless kept in bfloat16 already; rows past the sequence end are zero.
__device__ void load_bf16(bf16* __restrict__ dst, int ld, const HeadInput& src, size_t at, size_t gld, int row0,
                          int seq, int dim) {
  for (int e = threadIdx.x; e < kRows * dim; e += kThreads) {
    const int r = e / dim, c = e - r * dim;
    const size_t i = at + size_t(row0 + r) * gld + c;
    dst[r * ld + c] = row0 + r >= seq ? __float2bfloat16_rn(0.0f)
                      : src.bf16      ? src.bf16[i]
                                      : __float2bfloat16_rn(src.f32[i]);
  }
}

// out[16 rows][16 * n] (+)= A[16][k] B[k][16 * n] over k = kSteps fragments, A and B given by
// where their fragment (row block, k step) starts; the warp's accumulators stay in registers and
// each A fragment is loaded once.
template <int N, int KSteps, typename FA, typename FB, typename APtr, typename BPtr>
__device__ void warp_product(FragC (&acc)[N], APtr a_at, int lda, BPtr b_at, int ldb) {
#pragma unroll
  for (int kk = 0; kk < KSteps; ++kk) {
    FA a;
    wmma::load_matrix_sync(a, a_at(kk), lda);
#pragma unroll
    for (int n = 0; n < N; ++n) {
      FB b;
      wmma::load_matrix_sync(b, b_at(kk, n), ldb);
      wmma::mma_sync(acc[n], a, b, acc[n]);
    }
  }
}

// The warp's 16 rows of scores against a 64-row tile: dst[w0..][0..64) = A_w B^T, A_w [16][dim]
// and B [64][dim] both row-major bf16 tiles.
template <int Dim>
__device__ void warp_scores(float* dst, const bf16* a_rows, int lda, const bf16* b_tile, int ldb) {
  FragC acc[kRows / kF];
#pragma unroll
  for (int n = 0; n < kRows / kF; ++n) wmma::fill_fragment(acc[n], 0.0f);
  warp_product<kRows / kF, Dim / kF, FragA, FragBt>(
      acc, [&](int kk) { return a_rows + kk * kF; }, lda,
      [&](int kk, int n) { return b_tile + n * kF * ldb + kk * kF; }, ldb);
#pragma unroll
  for (int n = 0; n < kRows / kF; ++n) wmma::store_matrix_sync(dst + n * kF, acc[n], kLdS, wmma::mem_row_major);
}

// Writes a warp's accumulators [16][16 * N] to rows row0.. of a head (those inside the sequence),
// one fragment at a time through the warp's 16 x 16 staging tile.
template <int N>
__device__ void store_rows(FragC (&acc)[N], float* stage, float* __restrict__ head, size_t gld, int row0, int seq) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int n = 0; n < N; ++n) {
    wmma::store_matrix_sync(stage, acc[n], kF, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < kF * kF; e += 32) {
      const int r = e / kF, c = e % kF;
      if (row0 + r < seq) head[size_t(row0 + r) * gld + n * kF + c] = stage[e];
    }
    __syncwarp();
  }
}

// The key and value tile from row k0, once every warp is done with the previous one; visible to
// all warps on return.
template <typename D>
__device__ void next_key_tile(bf16* sk, bf16* sv, const HeadInput& k, const HeadInput& v, const AttentionShape& s,
                              const HeadView& hd, int k0) {
  __syncthreads();
  load_bf16(sk, D::lq, k, hd.k, s.k.row, k0, s.seq, D::qk);
  load_bf16(sv, D::lv, v, hd.v, s.v.row, k0, s.seq, D::v);
  __syncthreads();
}

// The shared regions of each kernel, in the order the kernel takes them.
template <typename D>
struct ForwardSmem {
  size_t q, k, v, s, p, o, bytes;
  __host__ __device__ ForwardSmem() {
    Carver c;
    q = c.take<bf16>(kRows * D::lq), k = c.take<bf16>(kRows * D::lq), v = c.take<bf16>(kRows * D::lv);
    s = c.take<float>(kRows * kLdS), p = c.take<bf16>(kRows * kLdP), o = c.take<float>(kRows * D::lo);
    bytes = c.at;
  }
};

template <typename D>
struct BackwardSmem {
  size_t k, v, q, dout, s, dp, p, ds, lse, delta, stage, bytes;
  __host__ __device__ BackwardSmem() {
    Carver c;
    k = c.take<bf16>(kRows * D::lq), v = c.take<bf16>(kRows * D::lv);
    q = c.take<bf16>(kRows * D::lq), dout = c.take<bf16>(kRows * D::lv);
    s = c.take<float>(kRows * kLdS), dp = c.take<float>(kRows * kLdS);
    p = c.take<bf16>(kRows * kLdP), ds = c.take<bf16>(kRows * kLdP);
    lse = c.take<float>(kRows), delta = c.take<float>(kRows), stage = c.take<float>(kWarps * kF * kF);
    bytes = c.at;
  }
};

// The backward kernels' tiles, where BackwardSmem puts them. The key kernel holds its keys and
// values and streams queries and output gradients; the query kernel the other way round.
struct BackwardTiles {
  bf16 *k, *v, *q, *dout;  // [64][lq] or [64][lv]
  float *s, *dp;           // [64][kLdS] scores and dP, [query][key]
  bf16 *p, *ds;            // [64][kLdP] probabilities and score gradients, [query][key]
  float *lse, *delta;      // [64] of the query rows
  float* stage;            // [warps][16 * 16] for writing accumulators out
  template <typename D>
  __device__ static BackwardTiles in(unsigned char* smem) {
    const BackwardSmem<D> at;
    return {reinterpret_cast<bf16*>(smem + at.k),      reinterpret_cast<bf16*>(smem + at.v),
            reinterpret_cast<bf16*>(smem + at.q),      reinterpret_cast<bf16*>(smem + at.dout),
            reinterpret_cast<float*>(smem + at.s),     reinterpret_cast<float*>(smem + at.dp),
            reinterpret_cast<bf16*>(smem + at.p),      reinterpret_cast<bf16*>(smem + at.ds),
            reinterpret_cast<float*>(smem + at.lse),   reinterpret_cast<float*>(smem + at.delta),
            reinterpret_cast<float*>(smem + at.stage)};
  }
};

template <typename D>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(AttentionShape s, HeadInput q, HeadInput k, HeadInput v, float* __restrict__ out,
                   float* __restrict__ lse) {
  extern __shared__ __align__(128) unsigned char smem[];
  const ForwardSmem<D> at;
  bf16* sq = reinterpret_cast<bf16*>(smem + at.q);   // [64][lq] this block's queries
  bf16* sk = reinterpret_cast<bf16*>(smem + at.k);   // [64][lq] current key tile
  bf16* sv = reinterpret_cast<bf16*>(smem + at.v);   // [64][lv] current value tile
  float* ss = reinterpret_cast<float*>(smem + at.s); // [64][kLdS] scores, [query][key]
  bf16* sp = reinterpret_cast<bf16*>(smem + at.p);   // [64][kLdP] weights exp(score - running max)
  float* so = reinterpret_cast<float*>(smem + at.o); // [64][lo] unnormalised output

  const TilePlace pl = tile_place(s, true);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, q0 = pl.tile * kRows;
  const int w0 = warp * kF, r = w0 + lane / 2, half = lane % 2, i = q0 + r;
  const HeadView hd(s, pl.bh);
  load_bf16(sq, D::lq, q, hd.q, s.q.row, q0, s.seq, D::qk);
  for (int e = threadIdx.x; e < kRows * D::lo; e += kThreads) so[e] = 0.0f;

  OnlineSoftmax row;  // row r's state; the two lanes of a row hold the same copy
  for (int kt = 0; kt <= pl.tile; ++kt) {
    const int k0 = kt * kRows;
    next_key_tile<D>(sk, sv, k, v, s, hd, k0);
    warp_scores<D::qk>(ss + w0 * kLdS, sq + w0 * D::lq, D::lq, sk, D::lq);
    __syncwarp();
    float score[kHalf];
    float mx = -INFINITY;
#pragma unroll
    for (int c = 0; c < kHalf; ++c) {
      const int col = 2 * c + half, j = k0 + col;
      score[c] = i < s.seq && j <= i ? s.scale * ss[r * kLdS + col] : -INFINITY;
      mx = fmaxf(mx, score[c]);
    }
    const float alpha = row.rescale(fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1)));
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kHalf; ++c) {
      const float p = row.weight(score[c]);
      sum += p;
      sp[r * kLdP + 2 * c + half] = __float2bfloat16_rn(p);
    }
    row.add(sum + __shfl_xor_sync(0xffffffffu, sum, 1));  // the same sum, bit for bit, in both lanes
    for (int c = half; c < D::v; c += 2) so[r * D::lo + c] *= alpha;
    __syncwarp();
    // O_w = O_w + P_w V, the accumulators read from and written back to the warp's rows of so.
    FragC acc[D::v / kF];
#pragma unroll
    for (int n = 0; n < D::v / kF; ++n)
      wmma::load_matrix_sync(acc[n], so + w0 * D::lo + n * kF, D::lo, wmma::mem_row_major);
    warp_product<D::v / kF, kRows / kF, FragA, FragB>(
        acc, [&](int kk) { return sp + w0 * kLdP + kk * kF; }, kLdP,
        [&](int kk, int n) { return sv + kk * kF * D::lv + n * kF; }, D::lv);
#pragma unroll
    for (int n = 0; n < D::v / kF; ++n)
      wmma::store_matrix_sync(so + w0 * D::lo + n * kF, acc[n], D::lo, wmma::mem_row_major);
  }
  __syncwarp();
  if (i >= s.seq) return;
  if (half == 0) lse[size_t(pl.bh) * s.seq + i] = row.lse();
  for (int c = half; c < D::v; c += 2) out[hd.o + size_t(i) * s.o.row + c] = row.normalise(so[r * D::lo + c]);
}

// The warp's rows of one (query tile, key tile) pair in backward: scores S = Q K^T and
// dP = dout V^T, then p = exp(scale S - lse) and ds = p (dP - D) scale, 0 where masked, rounded
// into sp (when given) and sds.
template <typename D>
__device__ void score_grads(const AttentionShape& s, int q0, int k0, const bf16* sq, const bf16* sdo, const bf16* sk,
                            const bf16* sv, float* ss, float* sdp, const float* slse, const float* sdelta, bf16* sp,
                            bf16* sds) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int w0 = warp * kF, r = w0 + lane / 2, half = lane % 2, i = q0 + r;
  warp_scores<D::qk>(ss + w0 * kLdS, sq + w0 * D::lq, D::lq, sk, D::lq);
  warp_scores<D::v>(sdp + w0 * kLdS, sdo + w0 * D::lv, D::lv, sv, D::lv);
  __syncwarp();
#pragma unroll
  for (int c = 0; c < kHalf; ++c) {
    const int col = 2 * c + half, j = k0 + col;
    float p = 0.0f, ds = 0.0f;
    if (i < s.seq && j <= i) {
      p = softmax_prob(s.scale * ss[r * kLdS + col], slse[r]);
      ds = p * (sdp[r * kLdS + col] - sdelta[r]) * s.scale;
    }
    if (sp) sp[r * kLdP + col] = __float2bfloat16_rn(p);
    sds[r * kLdP + col] = __float2bfloat16_rn(ds);
  }
}

// dV = P^T dout and dK = dS^T Q for one key tile, summed over the query tiles at or after it. Warp
// w owns keys w0.. of the tile; its accumulators stay in registers.
template <typename D>
__global__ void __launch_bounds__(kThreads)
    key_grads_kernel(AttentionShape s, HeadInput q, HeadInput k, HeadInput v,
                     const float* __restrict__ dout, const float* __restrict__ lse,
                     const float* __restrict__ delta, float* __restrict__ dk, float* __restrict__ dv) {
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardTiles t = BackwardTiles::in<D>(smem);
  bf16 *sk = t.k, *sv = t.v, *sq = t.q, *sdo = t.dout, *sp = t.p, *sds = t.ds;
  float *ss = t.s, *sdp = t.dp, *slse = t.lse, *sdelta = t.delta, *stage = t.stage;

  const TilePlace pl = tile_place(s, false);
  const int warp = threadIdx.x / 32, w0 = warp * kF, k0 = pl.tile * kRows;
  const HeadView hd(s, pl.bh);
  load_bf16(sk, D::lq, k, hd.k, s.k.row, k0, s.seq, D::qk);
  load_bf16(sv, D::lv, v, hd.v, s.v.row, k0, s.seq, D::v);
  FragC adv[D::v / kF], adk[D::qk / kF];
#pragma unroll
  for (int n = 0; n < D::v / kF; ++n) wmma::fill_fragment(adv[n], 0.0f);
#pragma unroll
  for (int n = 0; n < D::qk / kF; ++n) wmma::fill_fragment(adk[n], 0.0f);

  for (int qt = pl.tile; qt < s.tiles; ++qt) {
    const int q0 = qt * kRows;
    __syncthreads();  // the previous query tile is no longer read
    load_bf16(sq, D::lq, q, hd.q, s.q.row, q0, s.seq, D::qk);
    load_bf16(sdo, D::lv, {dout, nullptr}, hd.o, s.o.row, q0, s.seq, D::v);
    load_row_values(slse, lse, s, pl.bh, q0, kRows);
    load_row_values(sdelta, delta, s, pl.bh, q0, kRows);
    __syncthreads();
    score_grads<D>(s, q0, k0, sq, sdo, sk, sv, ss, sdp, slse, sdelta, sp, sds);
    __syncthreads();  // dV and dK take every warp's rows of P and dS
    // (P^T)[key][query] is P[query][key] read column-major: the warp's keys are a column block.
    warp_product<D::v / kF, kRows / kF, FragAt, FragB>(
        adv, [&](int kk) { return sp + kk * kF * kLdP + w0; }, kLdP,
        [&](int kk, int n) { return sdo + kk * kF * D::lv + n * kF; }, D::lv);
    warp_product<D::qk / kF, kRows / kF, FragAt, FragB>(
        adk, [&](int kk) { return sds + kk * kF * kLdP + w0; }, kLdP,
        [&](int kk, int n) { return sq + kk * kF * D::lq + n * kF; }, D::lq);
  }
  float* mine = stage + warp * kF * kF;
  store_rows(adv, mine, dv + hd.dv, s.dv.row, k0 + w0, s.seq);
  store_rows(adk, mine, dk + hd.dk, s.dk.row, k0 + w0, s.seq);
}

// dQ = dS K for one query tile, summed over the key tiles at or before it. Warp w owns queries w0..
// of the tile and needs only its own rows of dS.
template <typename D>
__global__ void __launch_bounds__(kThreads)
    query_grads_kernel(AttentionShape s, HeadInput q, HeadInput k, HeadInput v,
                       const float* __restrict__ dout, const float* __restrict__ lse,
                       const float* __restrict__ delta, float* __restrict__ dq) {
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardTiles t = BackwardTiles::in<D>(smem);  // the probability tile goes unused here
  bf16 *sk = t.k, *sv = t.v, *sq = t.q, *sdo = t.dout, *sds = t.ds;
  float *ss = t.s, *sdp = t.dp, *slse = t.lse, *sdelta = t.delta, *stage = t.stage;

  const TilePlace pl = tile_place(s, true);
  const int warp = threadIdx.x / 32, w0 = warp * kF, q0 = pl.tile * kRows;
  const HeadView hd(s, pl.bh);
  load_bf16(sq, D::lq, q, hd.q, s.q.row, q0, s.seq, D::qk);
  load_bf16(sdo, D::lv, {dout, nullptr}, hd.o, s.o.row, q0, s.seq, D::v);
  load_row_values(slse, lse, s, pl.bh, q0, kRows);
  load_row_values(sdelta, delta, s, pl.bh, q0, kRows);
  FragC adq[D::qk / kF];
#pragma unroll
  for (int n = 0; n < D::qk / kF; ++n) wmma::fill_fragment(adq[n], 0.0f);

  for (int kt = 0; kt <= pl.tile; ++kt) {
    const int k0 = kt * kRows;
    next_key_tile<D>(sk, sv, k, v, s, hd, k0);
    score_grads<D>(s, q0, k0, sq, sdo, sk, sv, ss, sdp, slse, sdelta, nullptr, sds);
    __syncwarp();
    warp_product<D::qk / kF, kRows / kF, FragA, FragB>(
        adq, [&](int kk) { return sds + w0 * kLdP + kk * kF; }, kLdP,
        [&](int kk, int n) { return sk + kk * kF * D::lq + n * kF; }, D::lq);
  }
  store_rows(adq, stage + warp * kF * kF, dq + hd.dq, s.dq.row, q0 + w0, s.seq);
}

// Calls f(Dims<qk, v>{}) for the head dims the kernels are built for; false for others. The key
// kernel keeps (qk + v) / 16 accumulator fragments in registers, which bounds the list.
template <typename F>
bool with_dims(int qk, int v, F&& f) {
  if (qk == 32 && v == 32) return f(Dims<32, 32>{}), true;
  if (qk == 64 && v == 64) return f(Dims<64, 64>{}), true;
  if (qk == 128 && v == 128) return f(Dims<128, 128>{}), true;
  if (qk == 192 && v == 128) return f(Dims<192, 128>{}), true;  // DeepSeek-V3's MLA: 128 nope + 64 rope, v 128
  return false;
}

// `s` with this family's tiles.
AttentionShape tc_shape(AttentionShape s) {
  s.tiles = (s.seq + kRows - 1) / kRows;
  return s;
}

}  // namespace

bool attention_tc_forward(DeviceState* st, const AttentionForwardArgs& a) {
  const AttentionShape s = tc_shape(attention_shape(a, kRows));
  return with_dims(a.qk_dim, a.v_dim, [&](auto d) {
    using D = decltype(d);
    const size_t bytes = ForwardSmem<D>().bytes;
    allow_shared(st, forward_kernel<D>, bytes, s);
    forward_kernel<D><<<tile_blocks(s), kThreads, bytes, st->stream>>>(
        s, head_input(a.q, a.q_bf16), head_input(a.k, a.k_bf16), head_input(a.v, a.v_bf16), a.out, a.lse);
    MT_CUDA_CHECK_LAUNCH();
  });
}

bool attention_tc_backward(DeviceState* st, const AttentionBackwardArgs& a, const AttentionShape& shape,
                           const float* delta, float* dk, float* dv) {
  const AttentionShape s = tc_shape(shape);
  return with_dims(a.qk_dim, a.v_dim, [&](auto d) {
    using D = decltype(d);
    const size_t bytes = BackwardSmem<D>().bytes;
    const HeadInput q = head_input(a.q, a.q_bf16), k = head_input(a.k, a.k_bf16), v = head_input(a.v, a.v_bf16);
    allow_shared(st, key_grads_kernel<D>, bytes, s);
    allow_shared(st, query_grads_kernel<D>, bytes, s);
    key_grads_kernel<D><<<tile_blocks(s), kThreads, bytes, st->stream>>>(s, q, k, v, a.dout, a.lse, delta, dk, dv);
    MT_CUDA_CHECK_LAUNCH();
    query_grads_kernel<D><<<tile_blocks(s), kThreads, bytes, st->stream>>>(s, q, k, v, a.dout, a.lse, delta,
                                                                          a.dq);
    MT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mt::cuda
