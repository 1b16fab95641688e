#pragma once
// Arguments of the dispatch ops: the grouping of (token, expert) rows by expert, the order of the
// rows an expert-parallel rank receives, the row gather, the gated combine and the multi-token
// prediction's shifted inputs. Included by ops/op_list.hpp.
#include "ops/bf16.hpp"

namespace mt {

// Groups the (token, k) pairs by expert; within an expert the tokens keep their order (a stable
// counting sort), so the permutation does not depend on the device.
struct MoePermuteArgs {
  int tokens = 0, top_k = 0, experts = 0;
  const int* chosen = nullptr;  // [tokens, top_k]
  int* expert_begin = nullptr;  // [experts + 1] out: expert e owns permuted rows [begin[e], begin[e+1])
  int* perm_token = nullptr;    // [tokens * top_k] out: the token of each permuted row
  int* slot_row = nullptr;      // [tokens * top_k] out: the permuted row of (token, k)
  double* load = nullptr;       // [experts] += rows routed to each expert; may be null
};

// Expert parallelism: where the rows a rank receives go. They arrive grouped by (source rank,
// local expert), counts[q * local + j] rows from rank q for local expert j, and the grouped GEMMs
// take them grouped by (local expert, source). Built on the device from the exchanged counts, so
// the host moves only those.
struct MoeArrivalsArgs {
  int sources = 0, local = 0;   // expert-parallel ranks, experts on this rank
  int rows = 0;                 // rows arriving, the sum of counts (the host knows it from the exchange)
  const int* counts = nullptr;  // [sources * local]
  int* local_begin = nullptr;   // [local + 1] out: local expert j computes on rows [begin[j], begin[j+1])
  int* local_of = nullptr;      // [rows] out: arriving row -> local row
  int* arrival_of = nullptr;    // [rows] out: local row -> arriving row
};

// dst[r, :] = src[index[r], :] for r < rows, `cols` values a row.
// Rows in bfloat16 (bf16 activations): src_bf16 in place of src, dst_bf16 in place of dst; an
// fp32 source into a bfloat16 destination is rounded.
struct GatherRowsArgs {
  int rows = 0, cols = 0;
  const float* src = nullptr; const int* index = nullptr;
  float* dst = nullptr;
  const Bf16* src_bf16 = nullptr;
  Bf16* dst_bf16 = nullptr;
};

// y[t] += sum over k of gate[t,k] * rows[slot_row[t,k]], added in k order (gate 1 when gates is
// null: the backward pass's sum of a token's input gradients).
struct MoeCombineArgs {
  int tokens = 0, top_k = 0, dim = 0;
  const float* rows = nullptr; const int* slot_row = nullptr; const float* gates = nullptr;
  float* y = nullptr;
};
// The combine's backward: drows[slot_row[t,k]] = gate[t,k] * dy[t], dgate[t,k] = dy[t] . rows[slot_row[t,k]].
struct MoeCombineBackwardArgs {
  int tokens = 0, top_k = 0, dim = 0;
  const float* dy = nullptr; const float* rows = nullptr; const int* slot_row = nullptr;
  const float* gates = nullptr;
  float* drows = nullptr;  // [tokens * top_k, dim] out, permuted order
  float* dgate = nullptr;  // [tokens, top_k] out
};

// Multi-token prediction's inputs at depth `shift`: position r takes token and target r + shift
// of its sequence, or token 0 and target -1 (no loss) past the sequence's end.
struct ShiftTokensArgs {
  int rows = 0, seq = 0, shift = 0;
  const int* tokens = nullptr; const int* targets = nullptr;
  int* tokens_out = nullptr; int* targets_out = nullptr;
};

}  // namespace mt
