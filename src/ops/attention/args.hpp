#pragma once
// Arguments of the attention ops: causal training attention and one decoding step.
#include "ops/bf16.hpp"
#include "ops/fp8/row_codes.hpp"
#include "ops/gemm/args.hpp"

namespace mt {

// Where a [batch*seq, heads, dim] operand of the attention ops lives: element (token t, head h,
// feature c) at t * row + h * head + c. 0 is the packed default (row = heads * dim, head = dim),
// so callers that pass whole tensors set nothing; a layer reads or writes heads inside a wider
// tensor (MLA's values inside its [k_nope; v] projection) by giving that tensor's strides.
struct HeadStrides {
  int row = 0, head = 0;
};

// Causal softmax attention. q,k: [batch*seq, heads, qk_dim], v and out: [batch*seq, heads, v_dim].
// Row t of a head attends to keys 0..t with probabilities softmax(scale * q_t . k_s). No
// [seq, seq] matrix survives the op: forward saves lse [batch, heads, seq], the log-sum-exp of
// each row's scaled scores, from which backward recomputes the probabilities exp(score - lse).
// `inputs`: fp32 multiplies in fp32 throughout; bf16 and fp8 round what enters each product to
// bfloat16 (q, k, v, dout, the probabilities, the score gradients) and accumulate in fp32, as
// tensor cores do (FP8 training keeps attention in BF16, as DeepSeek-V3 does). The statistics
// (max, sum, lse, D = rowsum(dout * out)) stay fp32.
// Grouped-query attention: k and v (and dk, dv) hold kv_heads heads (0: heads), query head h
// reading key/value head h / (heads / kv_heads); backward sums a group's gradients in head order.
struct AttentionForwardArgs {
  int batch = 0, seq = 0, heads = 0, qk_dim = 0, v_dim = 0; float scale = 1.0f;
  const float* q = nullptr; const float* k = nullptr; const float* v = nullptr;
  float* out = nullptr; float* lse = nullptr;
  GemmPrecision inputs = GemmPrecision::fp32;
  // q, k or v stored in bfloat16 (bf16 inputs only, whose rounding leaves them as they are), in
  // place of q, k or v.
  const Bf16* q_bf16 = nullptr; const Bf16* k_bf16 = nullptr; const Bf16* v_bf16 = nullptr;
  int kv_heads = 0;
  HeadStrides q_at = {}, k_at = {}, v_at = {}, out_at = {};
  // out's FP8 codes and scales as well (codes set; out packed), for the output projection's GEMM:
  // rows of heads * v_dim values (ops/fp8/row_codes.hpp).
  Fp8RowCodes out_fp8 = {};
  // QK-Clip's statistic (set: computed; null: no cost): max_logit[h] = max(max_logit[h], the largest
  // scale * q_t . k_s of query head h over s <= t and every sequence), in device memory. The products
  // take what the attention's products take (bfloat16-rounded q and k under bf16 inputs).
  float* max_logit = nullptr;
};
// Takes the forward's out and lse; dq, dk, dv are overwritten. dout is laid out as out_at says.
struct AttentionBackwardArgs {
  int batch = 0, seq = 0, heads = 0, qk_dim = 0, v_dim = 0; float scale = 1.0f;
  const float* q = nullptr; const float* k = nullptr; const float* v = nullptr;
  const float* out = nullptr; const float* lse = nullptr; const float* dout = nullptr;
  float* dq = nullptr; float* dk = nullptr; float* dv = nullptr;
  GemmPrecision inputs = GemmPrecision::fp32;
  const Bf16* q_bf16 = nullptr; const Bf16* k_bf16 = nullptr; const Bf16* v_bf16 = nullptr;  // as in forward
  int kv_heads = 0;
  HeadStrides q_at = {}, k_at = {}, v_at = {}, out_at = {}, dq_at = {}, dk_at = {}, dv_at = {};
};

// QK-Clip's rescaling of one projection's rows (train/qk_clip.hpp): w is [heads * head_rows, cols], a
// head's rows one after another, and rows [begin, end) of head h are multiplied by gamma^power, gamma =
// tau / S_h, when S_h > tau. S_h: the largest of max_logit[c * stride + h] over c < copies (device memory;
// each copy a rank's per-head maxima). gamma and its square root are computed in fp32.
struct QkClipRowsArgs {
  float* w = nullptr;
  int heads = 0, head_rows = 0, cols = 0, begin = 0, end = 0;
  float power = 1.0f, tau = 0.0f;
  const float* max_logit = nullptr;
  int copies = 1, stride = 0;
};

// The strides `at` means for a tensor of `heads` heads of `dim` features (0s filled in).
inline HeadStrides packed_or(HeadStrides at, int heads, int dim) {
  return {at.row ? at.row : heads * dim, at.head ? at.head : dim};
}

// The attention of one new position over the keys and values of every position so far (a
// decoder's cache, the new one last): out[h] = sum_s p[h,s] v[s,g], p[h] = softmax_s(scale
// q[h] . k[s,g]) over s < length, where query head h reads key/value head g = h / (heads /
// kv_heads; 0: heads). fp32 throughout; `scores` [heads, length] is the op's workspace.
struct AttentionDecodeArgs {
  int length = 0, heads = 0, kv_heads = 0, qk_dim = 0, v_dim = 0; float scale = 1.0f;
  const float* q = nullptr;  // [heads, qk_dim]
  const float* k = nullptr;  // [length, kv_heads, qk_dim]
  const float* v = nullptr;  // [length, kv_heads, v_dim]
  float* scores = nullptr;
  float* out = nullptr;      // [heads, v_dim]
};

}  // namespace mt
