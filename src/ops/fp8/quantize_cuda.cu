// FP8 quantization kernels (see quantize_cuda.cuh). Every code and scale comes from the shared
// host/device functions float_to_fp8 and fp8_scale with the same fp32 operations as the CPU
// (an IEEE division x / s; amax by fmaxf, which like the CPU's std::max passes over NaNs), so
// both sides produce the same bits. amax is a max, so combining partial maxima with atomics in
// any order gives the same result.
#include <algorithm>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/fp8/quantize_cuda.cuh"
#include "ops/backend/launch.cuh"
#include "ops/backend/cuda_backend.hpp"

namespace mt::cuda {

namespace {

constexpr int kVec = 128;  // cuBLASLt's VEC128 and BLK128x128 granularity
constexpr int kTile = 32;  // the transposing quantizer's square tile
constexpr int kMaxGridY = 65535;

// Non-negative floats order like their bit patterns, so atomicMax on the bits is a float max.
__device__ void max_into(unsigned* amax, float m) { atomicMax(amax, __float_as_uint(m)); }

// Stored [outer, k]: one warp per row segment of one piece, reading along the row.
__global__ void amax_k_contiguous_kernel(const float* __restrict__ x, int outer, int k, int piece_outer, int piece_k,
                                         int pieces_k, unsigned* __restrict__ amax) {
  const int lane = threadIdx.x & 31;
  const size_t warps = (size_t(gridDim.x) * blockDim.x) >> 5;
  const size_t segments = size_t(outer) * pieces_k;
  for (size_t w = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; w < segments; w += warps) {
    const int i = int(w / pieces_k), kb = int(w % pieces_k);
    const int k0 = kb * piece_k, k1 = min(k, k0 + piece_k);
    const float* row = x + size_t(i) * k;
    float m = 0.0f;
    for (int c = k0 + lane; c < k1; c += 32) m = fmaxf(m, fabsf(row[c]));
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (lane == 0) max_into(&amax[size_t(i / piece_outer) * pieces_k + kb], m);
  }
}

// Stored [k, outer]: one thread per column i and run of `run` rows, neighbouring threads on
// neighbouring columns (coalesced). A run that crosses a piece boundary flushes at the crossing.
__global__ void amax_k_strided_kernel(const float* __restrict__ x, int outer, int k, int piece_outer, int piece_k,
                                      int pieces_k, int run, unsigned* __restrict__ amax) {
  const size_t runs = size_t((k + run - 1) / run) * outer;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t t = size_t(blockIdx.x) * blockDim.x + threadIdx.x; t < runs; t += stride) {
    const int i = int(t % outer), k0 = int(t / outer) * run, k1 = min(k, k0 + run);
    unsigned* row = amax + size_t(i / piece_outer) * pieces_k;
    int piece = k0 / piece_k;
    float m = 0.0f;
    for (int kk = k0; kk < k1; ++kk) {
      if (kk / piece_k != piece) {
        max_into(&row[piece], m);
        piece = kk / piece_k;
        m = 0.0f;
      }
      m = fmaxf(m, fabsf(x[size_t(kk) * outer + i]));
    }
    max_into(&row[piece], m);
  }
}

// In place: the amax bits of each piece become its scale.
__global__ void scales_from_amax_kernel(float* scales, size_t n, Fp8Format format, bool pow2) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t p = size_t(blockIdx.x) * blockDim.x + threadIdx.x; p < n; p += stride) {
    const float amax = __uint_as_float(reinterpret_cast<const unsigned*>(scales)[p]);
    scales[p] = fp8_scale(amax, format, pow2);
  }
}

// A kTile x kTile square of the [outer, k] view goes through shared memory, read along the
// storage's rows and written along k, so both the [outer, k] and the [k, outer] storage read and
// write coalesced. Block: kTile x 8 threads; grid.x over outer, grid.y (strided) over k.
__global__ void quantize_codes_kernel(const float* __restrict__ x, int outer, int k, bool k_contiguous,
                                      const float* __restrict__ scales, int piece_outer, int piece_k, int pieces_k,
                                      Fp8Format format, uint8_t* __restrict__ codes, int outer_pad, int k_pad) {
  __shared__ float tile[kTile][kTile + 1];  // [outer][k]; the +1 spreads a column over all banks
  const int tx = threadIdx.x, i0 = blockIdx.x * kTile;
  for (int k0 = blockIdx.y * kTile; k0 < k_pad; k0 += gridDim.y * kTile) {
    for (int r = threadIdx.y; r < kTile; r += blockDim.y) {
      if (k_contiguous) {
        const int i = i0 + r, kk = k0 + tx;
        tile[r][tx] = i < outer && kk < k ? x[size_t(i) * k + kk] : 0.0f;
      } else {
        const int i = i0 + tx, kk = k0 + r;
        tile[tx][r] = i < outer && kk < k ? x[size_t(kk) * outer + i] : 0.0f;
      }
    }
    __syncthreads();
    for (int r = threadIdx.y; r < kTile; r += blockDim.y) {
      const int i = i0 + r, kk = k0 + tx;
      if (i >= outer_pad || kk >= k_pad) continue;
      uint8_t code = 0;
      if (i < outer && kk < k)
        code = float_to_fp8(tile[r][tx] / scales[size_t(i / piece_outer) * pieces_k + kk / piece_k], format);
      codes[size_t(i) * k_pad + kk] = code;
    }
    __syncthreads();
  }
}

// VEC128: out[b * outer_pad + i], BLK128x128: out[p * l4 + b] with p = i / 128; b = k / 128.
__global__ void cublas_scales_kernel(const float* __restrict__ scales, int outer, int piece_outer, int piece_k,
                                     int pieces_k, bool blocks, int outer_pad, int l, int l4, size_t n,
                                     float* __restrict__ out) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t t = size_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += stride) {
    const int b = blocks ? int(t % l4) : int(t / outer_pad);
    const int i = blocks ? int(t / l4) * kVec : int(t % outer_pad);
    const bool real = i < outer && b < l;
    out[t] = real ? scales[size_t(i / piece_outer) * pieces_k + size_t(b) * kVec / piece_k] : 1.0f;
  }
}

__global__ void dequantized_copy_kernel(const float* __restrict__ x, int outer, int k, bool k_contiguous,
                                        const float* __restrict__ scales, int piece_outer, int piece_k, int pieces_k,
                                        Fp8Format format, float* __restrict__ out) {
  const size_t n = size_t(outer) * k, stride = size_t(gridDim.x) * blockDim.x;
  for (size_t t = size_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += stride) {
    const int i = k_contiguous ? int(t / k) : int(t % outer), kk = k_contiguous ? int(t % k) : int(t / outer);
    const float s = scales[size_t(i / piece_outer) * pieces_k + kk / piece_k];
    out[t] = fp8_to_float(float_to_fp8(x[t] / s, format), format) * s;
  }
}

int blocks_of(int n, int piece) { return (n + piece - 1) / piece; }

}  // namespace

Fp8View fp8_view(const Fp8Recipe& recipe, Fp8Operand kind, const float* x, int outer, int k, bool k_contiguous) {
  Fp8View v;
  v.x = x;
  v.outer = outer;
  v.k = k;
  v.k_contiguous = k_contiguous;
  if (recipe.per_tensor) {
    v.piece_outer = std::max(outer, 1);
    v.piece_k = std::max(k, 1);
  } else if (kind == Fp8Operand::weight) {
    v.piece_outer = v.piece_k = recipe.block;
  } else {
    v.piece_outer = 1;
    v.piece_k = recipe.tile;
  }
  v.format = recipe.format(kind);
  v.pow2 = recipe.pow2_scales;
  return v;
}

void fp8_piece_scales(DeviceState* s, const Fp8View& v, float* scales) {
  const size_t n = v.pieces();
  MT_CUDA_CHECK(cudaMemsetAsync(scales, 0, n * sizeof(float), s->stream));
  auto* amax = reinterpret_cast<unsigned*>(scales);
  if (v.k_contiguous) {
    const size_t threads = size_t(v.outer) * v.pieces_k() * 32;
    amax_k_contiguous_kernel<<<stride_grid(s, threads, kBlock), kBlock, 0, s->stream>>>(
        v.x, v.outer, v.k, v.piece_outer, v.piece_k, v.pieces_k(), amax);
  } else {
    // Runs of at most 256 rows keep a whole-tensor piece from serialising down each column.
    const int run = std::min(v.piece_k, 256);
    const size_t threads = size_t(blocks_of(v.k, run)) * v.outer;
    amax_k_strided_kernel<<<stride_grid(s, threads, kBlock), kBlock, 0, s->stream>>>(
        v.x, v.outer, v.k, v.piece_outer, v.piece_k, v.pieces_k(), run, amax);
  }
  MT_CUDA_CHECK_LAUNCH();
  scales_from_amax_kernel<<<stride_grid(s, n, kBlock), kBlock, 0, s->stream>>>(scales, n, v.format, v.pow2);
  MT_CUDA_CHECK_LAUNCH();
}

void fp8_quantize_codes(DeviceState* s, const Fp8View& v, const float* piece_scales, uint8_t* codes, int outer_pad,
                        int k_pad) {
  const dim3 block(kTile, 8);
  const dim3 grid(unsigned(blocks_of(outer_pad, kTile)), unsigned(std::min(blocks_of(k_pad, kTile), kMaxGridY)));
  quantize_codes_kernel<<<grid, block, 0, s->stream>>>(v.x, v.outer, v.k, v.k_contiguous, piece_scales,
                                                       v.piece_outer, v.piece_k, v.pieces_k(), v.format, codes,
                                                       outer_pad, k_pad);
  MT_CUDA_CHECK_LAUNCH();
}

bool fp8_expressible(const Fp8View& v, Fp8Scaling mode) {
  const bool along_k = v.piece_k % kVec == 0 || v.piece_k >= v.k;
  switch (mode) {
    case Fp8Scaling::scalar: return v.pieces() == 1;
    case Fp8Scaling::vec128: return along_k;
    case Fp8Scaling::blk128: return along_k && (v.piece_outer % kVec == 0 || v.piece_outer >= v.outer);
  }
  return false;
}

size_t fp8_scale_count(const Fp8View& v, Fp8Scaling mode, int outer_pad) {
  const size_t l = size_t(blocks_of(v.k, kVec));
  switch (mode) {
    case Fp8Scaling::scalar: return 1;
    case Fp8Scaling::vec128: return l * outer_pad;
    case Fp8Scaling::blk128: return size_t(blocks_of(outer_pad, kVec)) * ((l + 3) / 4 * 4);
  }
  return 0;
}

void fp8_cublas_scales(DeviceState* s, const Fp8View& v, const float* piece_scales, Fp8Scaling mode, int outer_pad,
                       float* out) {
  const size_t n = fp8_scale_count(v, mode, outer_pad);
  const int l = blocks_of(v.k, kVec);
  cublas_scales_kernel<<<stride_grid(s, n, kBlock), kBlock, 0, s->stream>>>(
      piece_scales, v.outer, v.piece_outer, v.piece_k, v.pieces_k(), mode == Fp8Scaling::blk128, outer_pad, l,
      (l + 3) / 4 * 4, n, out);
  MT_CUDA_CHECK_LAUNCH();
}

void fp8_dequantized_copy(DeviceState* s, const Fp8View& v, const float* piece_scales, float* out) {
  const size_t n = size_t(v.outer) * v.k;
  dequantized_copy_kernel<<<stride_grid(s, n, kBlock), kBlock, 0, s->stream>>>(
      v.x, v.outer, v.k, v.k_contiguous, piece_scales, v.piece_outer, v.piece_k, v.pieces_k(), v.format, out);
  MT_CUDA_CHECK_LAUNCH();
}

void fp8_quantize_weight(DeviceState* s, const Fp8WeightArgs& a) {
  activate(s);
  const Fp8WeightLayout l = fp8_weight_layout(*a.recipe, a.rows, a.cols, a.transposed);
  const size_t stored = size_t(a.rows) * a.cols;
  for (int g = 0; g < a.groups; ++g) {
    // The stored matrix is [outer, k] as it is, or [k, outer] when the view transposes it.
    const Fp8View v = fp8_view(*a.recipe, Fp8Operand::weight, a.x + g * stored, l.outer, l.k, !a.transposed);
    float* scales = a.scales + g * l.pieces();
    fp8_piece_scales(s, v, scales);
    fp8_quantize_codes(s, v, scales, a.codes + g * l.codes(), l.outer_pad, l.k_pad);
  }
}

}  // namespace mt::cuda

namespace mt {

CudaFp8Operand cuda_fp8_quantize(const Backend& gpu, const float* x, int rows, int cols, bool k_along_rows,
                                 Fp8Operand kind, const Fp8Recipe& recipe) {
  DeviceState* s = gpu.state;
  activate(s);
  const int outer = k_along_rows ? cols : rows, k = k_along_rows ? rows : cols;
  const cuda::Fp8View v = cuda::fp8_view(recipe, kind, x, outer, k, !k_along_rows);
  CudaFp8Operand q{outer, k, fp8_pad(outer, kFp8PadOuter), fp8_pad(k, kFp8PadK),
                   v.piece_outer, v.piece_k, {}, {}};
  q.codes.resize(size_t(q.outer_pad) * q.k_pad);
  q.scales.resize(v.pieces());
  const size_t codes_bytes = (q.codes.size() + 255) / 256 * 256;
  char* base = static_cast<char*>(scratch(s, kScratchGemmA, codes_bytes + q.scales.size() * sizeof(float)));
  auto* codes = reinterpret_cast<uint8_t*>(base);
  auto* scales = reinterpret_cast<float*>(base + codes_bytes);
  cuda::fp8_piece_scales(s, v, scales);
  cuda::fp8_quantize_codes(s, v, scales, codes, q.outer_pad, q.k_pad);
  MT_CUDA_CHECK(cudaMemcpyAsync(q.codes.data(), codes, q.codes.size(), cudaMemcpyDeviceToHost, s->stream));
  MT_CUDA_CHECK(cudaMemcpyAsync(q.scales.data(), scales, q.scales.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                s->stream));
  MT_CUDA_CHECK(cudaStreamSynchronize(s->stream));
  return q;
}

}  // namespace mt
