// Moving token rows on the GPU: the stable grouping of (token, expert) pairs by expert, the order
// of the rows an expert-parallel rank receives, row gathers, the gated combine and its backward
// pass, and multi-token prediction's shifted tokens.
// The grouping is deterministic: each expert's block scans the pairs in order, so every row lands
// where the CPU reference's counting sort puts it.
#include <cuda_bf16.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/launch.cuh"
#include "util/error.hpp"

namespace mt::cuda {

namespace {

// Block e counts the pairs routed to expert e.
__global__ void count_kernel(const int* chosen, int pairs, int* counts) {
  using Reduce = cub::BlockReduce<int, kBlock>;
  __shared__ typename Reduce::TempStorage tmp;
  const int e = blockIdx.x;
  int n = 0;
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) n += chosen[i] == e;
  n = Reduce(tmp).Sum(n);
  if (threadIdx.x == 0) counts[e] = n;
}

// Few experts: one thread turns counts into segment starts and adds them to the load.
__global__ void offsets_kernel(const int* counts, int experts, int* begin, double* load) {
  begin[0] = 0;
  for (int e = 0; e < experts; ++e) {
    begin[e + 1] = begin[e] + counts[e];
    if (load) load[e] += counts[e];
  }
}

// Block e walks the pairs in order and gives its own a row each, in that order.
__global__ void place_kernel(MoePermuteArgs a, int pairs) {
  using Scan = cub::BlockScan<int, kBlock>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int placed;
  const int e = blockIdx.x;
  if (threadIdx.x == 0) placed = a.expert_begin[e];
  __syncthreads();
  for (int base = 0; base < pairs; base += blockDim.x) {
    const int i = base + threadIdx.x;
    const int mine = i < pairs && a.chosen[i] == e;
    int before = 0, chunk = 0;
    Scan(tmp).ExclusiveSum(mine, before, chunk);
    if (mine) {
      const int row = placed + before;
      a.perm_token[row] = i / a.top_k;
      a.slot_row[i] = row;
    }
    __syncthreads();  // everyone has read `placed` and the scan storage before they change
    if (threadIdx.x == 0) placed += chunk;
    __syncthreads();
  }
}

// One thread: the local experts' offsets, and where each (source, local expert) segment starts
// among the arriving rows and among the local rows. Few segments (the layer's experts).
__global__ void arrival_starts_kernel(MoeArrivalsArgs a, int* arrive_start, int* local_start) {
  const int L = a.local;
  a.local_begin[0] = 0;
  for (int j = 0; j < L; ++j) {
    int at = a.local_begin[j];
    for (int q = 0; q < a.sources; ++q) {
      local_start[q * L + j] = at;
      at += a.counts[q * L + j];
    }
    a.local_begin[j + 1] = at;
  }
  int arrived = 0;
  for (int seg = 0; seg < a.sources * L; ++seg) {
    arrive_start[seg] = arrived;
    arrived += a.counts[seg];
  }
}

// Block `seg` maps its segment's rows both ways; rows past a.rows (counts that disagree with the
// host's total) are not written.
__global__ void arrival_place_kernel(MoeArrivalsArgs a, const int* arrive_start, const int* local_start) {
  const int seg = blockIdx.x, n = a.counts[seg];
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int from = arrive_start[seg] + i, to = local_start[seg] + i;
    if (from >= a.rows || to >= a.rows) return;
    a.local_of[from] = to;
    a.arrival_of[to] = from;
  }
}

__global__ void gather_kernel(GatherRowsArgs a) {
  const size_t r = blockIdx.x, from = size_t(a.index[r]) * a.cols, to = r * a.cols;
  for (int c = threadIdx.x; c < a.cols; c += blockDim.x) {
    if (a.src_bf16) a.dst_bf16[to + c] = a.src_bf16[from + c];
    else if (a.dst_bf16) a.dst_bf16[to + c].bits = __bfloat16_as_ushort(__float2bfloat16_rn(a.src[from + c]));
    else a.dst[to + c] = a.src[from + c];
  }
}

// Block t: y[t] += gates * rows, k by k in the CPU's order for each element.
__global__ void combine_kernel(MoeCombineArgs a) {
  const size_t t = blockIdx.x;
  for (int c = threadIdx.x; c < a.dim; c += blockDim.x) {
    float out = a.y[t * a.dim + c];
    for (int k = 0; k < a.top_k; ++k) {
      const float g = a.gates ? a.gates[t * a.top_k + k] : 1.0f;
      out = __fadd_rn(out, __fmul_rn(g, a.rows[size_t(a.slot_row[t * a.top_k + k]) * a.dim + c]));
    }
    a.y[t * a.dim + c] = out;
  }
}

// Block (t, k): drows = g dy[t]; dgate = dy[t] . rows[r], reduced over the block in double.
__global__ void combine_backward_kernel(MoeCombineBackwardArgs a) {
  using Reduce = cub::BlockReduce<double, kBlock>;
  __shared__ typename Reduce::TempStorage tmp;
  const size_t pair = blockIdx.x, t = pair / a.top_k;
  const size_t r = size_t(a.slot_row[pair]);
  const float g = a.gates[pair];
  double dot = 0;
  for (int c = threadIdx.x; c < a.dim; c += blockDim.x) {
    const float dy = a.dy[t * a.dim + c];
    a.drows[r * a.dim + c] = g * dy;
    dot += double(dy) * a.rows[r * a.dim + c];
  }
  dot = Reduce(tmp).Sum(dot);
  if (threadIdx.x == 0) a.dgate[pair] = float(dot);
}

__global__ void shift_kernel(ShiftTokensArgs a) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= a.rows) return;
  const bool inside = r % a.seq + a.shift < a.seq;
  a.tokens_out[r] = inside ? a.tokens[r + a.shift] : 0;
  a.targets_out[r] = inside ? a.targets[r + a.shift] : -1;
}

}  // namespace

void moe_permute(DeviceState* s, const MoePermuteArgs& a) {
  activate(s);
  const int pairs = a.tokens * a.top_k;
  auto* counts = static_cast<int*>(scratch(s, kScratchCounts, size_t(a.experts) * sizeof(int)));
  count_kernel<<<a.experts, kBlock, 0, s->stream>>>(a.chosen, pairs, counts);
  MT_CUDA_CHECK_LAUNCH();
  offsets_kernel<<<1, 1, 0, s->stream>>>(counts, a.experts, a.expert_begin, a.load);
  MT_CUDA_CHECK_LAUNCH();
  place_kernel<<<a.experts, kBlock, 0, s->stream>>>(a, pairs);
  MT_CUDA_CHECK_LAUNCH();
}

void moe_arrivals(DeviceState* s, const MoeArrivalsArgs& a) {
  activate(s);
  const int segments = a.sources * a.local;
  // The counts slot: moe_permute's use of it ended earlier on this stream.
  auto* starts = static_cast<int*>(scratch(s, kScratchCounts, 2 * size_t(segments) * sizeof(int)));
  arrival_starts_kernel<<<1, 1, 0, s->stream>>>(a, starts, starts + segments);
  MT_CUDA_CHECK_LAUNCH();
  if (a.rows == 0) return;
  arrival_place_kernel<<<segments, kBlock, 0, s->stream>>>(a, starts, starts + segments);
  MT_CUDA_CHECK_LAUNCH();
}

void gather_rows(DeviceState* s, const GatherRowsArgs& a) {
  if (a.rows == 0) return;
  MT_CHECK(!a.src_bf16 || a.dst_bf16);
  activate(s);
  gather_kernel<<<a.rows, kBlock, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

void moe_combine(DeviceState* s, const MoeCombineArgs& a) {
  if (a.tokens == 0) return;
  activate(s);
  combine_kernel<<<a.tokens, kBlock, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

void moe_combine_backward(DeviceState* s, const MoeCombineBackwardArgs& a) {
  if (a.tokens == 0) return;
  activate(s);
  combine_backward_kernel<<<a.tokens * a.top_k, kBlock, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

void shift_tokens(DeviceState* s, const ShiftTokensArgs& a) {
  if (a.rows == 0) return;
  activate(s);
  shift_kernel<<<blocks_for(a.rows), kBlock, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
