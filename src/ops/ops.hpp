#pragma once
// The op table: every numeric operation the model performs, with one signature per op.
// src/ops/cpu/ holds the reference implementations (plain loops or BLAS); kernels/ holds the
// CUDA ones. Layers call ops only through a Backend, so a device is a table plus its state.
// All tensors are row-major; pointers live on the backend's device.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/bf16.hpp"
#include "ops/fp8_recipe.hpp"
#include "ops/moe_args.hpp"
#include "ops/op_math.hpp"
#include "ops/update_args.hpp"

namespace mt {

// Storage precision of GEMM inputs. bf16 rounds A and B to bfloat16 (round to nearest even)
// and accumulates in fp32: the CPU reference emulates exactly what the GPU path computes. fp8
// quantizes them as the call's recipe says (ops/fp8_recipe.hpp), by what each operand is.
enum class GemmInputs { fp32, bf16, fp8 };

// What an FP8 GEMM needs besides GemmInputs::fp8: the recipe and the kind of each operand.
struct Fp8Gemm {
  const Fp8Recipe* recipe = nullptr;
  Fp8Operand a = Fp8Operand::activation, b = Fp8Operand::weight;
};

// C[m,n] = alpha * op(A) * op(B) + beta * C, op(A) is [m,k], op(B) is [k,n].
// A is stored [m,k] (or [k,m] when trans_a), B is stored [k,n] (or [n,k] when trans_b).
struct GemmArgs {
  int m = 0, n = 0, k = 0;
  const float* a = nullptr; bool trans_a = false;
  const float* b = nullptr; bool trans_b = false;
  float* c = nullptr;
  float alpha = 1.0f, beta = 0.0f;
  GemmInputs inputs = GemmInputs::fp32;
  Fp8Gemm fp8 = {};  // read when inputs is fp8
  // A or B stored in bfloat16 (an activation kept so, see GemmInput), in place of a or b: only
  // with bf16 inputs, whose rounding leaves such values as they are.
  const Bf16* a_bf16 = nullptr;
  const Bf16* b_bf16 = nullptr;
};

// An activation as GEMMs read it: fp32, or (with bf16 GEMM inputs) already rounded and stored in
// bfloat16, half the memory for the same products.
struct GemmInput {
  const float* f32 = nullptr;
  const Bf16* bf16 = nullptr;
  GemmInput() = default;
  GemmInput(const float* x) : f32(x) {}  // NOLINT: an fp32 activation converts
  GemmInput(const Bf16* x) : bf16(x) {}  // NOLINT: so does a bfloat16 one
};

// One GEMM per group of rows; group g owns rows [offsets[g], offsets[g+1]) of the ragged operands,
// so all the experts of a layer run in one call. offsets ([groups + 1]) are in host memory: the
// host sizes the call, so the device never stops to report group sizes (the caller reads them
// once per dispatch, which it needs anyway to size an expert-parallel exchange).
//   Ragged::rows    C[rows_g, n] = A[rows_g, k] op(B_g) (+ C when beta = 1), B_g = b + g*n*k stored
//                   [n, k] when trans_b, else [k, n] (forward: x W^T; input gradient: dy W)
//   Ragged::reduce  C_g[m, n] += A[rows_g, m]^T B[rows_g, n], C_g = c + g*m*n (weight gradients)
enum class Ragged { rows, reduce };
struct GroupedGemmArgs {
  int groups = 0;
  const int* offsets = nullptr;
  Ragged ragged = Ragged::rows;
  // The ragged dimension's entry (m for rows, k for reduce) holds all groups' rows together: the
  // ops never read it (offsets decide), profiles count FLOPs from it.
  int m = 0, n = 0, k = 0;
  const float* a = nullptr;
  const float* b = nullptr; bool trans_b = false;
  float* c = nullptr;
  float beta = 0.0f;
  GemmInputs inputs = GemmInputs::fp32;
  Fp8Gemm fp8 = {};  // read when inputs is fp8
  const Bf16* a_bf16 = nullptr;  // as GemmArgs: a or b stored in bfloat16
  const Bf16* b_bf16 = nullptr;
};

// y = x * rstd * weight per row, rstd = 1/sqrt(mean(x^2) + eps). rstd is saved for backward.
// y_bf16 in place of y: y rounded to bfloat16 as it is written (the cast fused into the norm).
// residual: the residual add fused in front of the norm: the normed rows are x + residual, which
// are written to `sum` (which may be x itself) and read once.
struct RmsNormForwardArgs {
  int rows = 0, dim = 0; float eps = 1e-6f;
  const float* x = nullptr; const float* weight = nullptr;
  float* y = nullptr; float* rstd = nullptr;
  Bf16* y_bf16 = nullptr;
  const float* residual = nullptr; float* sum = nullptr;
};
// dx = d(RMSNorm)/dx applied to dy (overwrites dx); plus residual_grad when set (the gradient
// that reaches the norm's input around it, added as it is written).
struct RmsNormBackwardInputArgs {
  int rows = 0, dim = 0;
  const float* dy = nullptr; const float* x = nullptr; const float* weight = nullptr;
  const float* rstd = nullptr; float* dx = nullptr;
  const float* residual_grad = nullptr;
};
// dweight += sum over rows of dy * x * rstd.
struct RmsNormBackwardWeightArgs {
  int rows = 0, dim = 0;
  const float* dy = nullptr; const float* x = nullptr; const float* rstd = nullptr;
  float* dweight = nullptr;
};

// Rotary position embedding on interleaved pairs (2i, 2i+1) of the last `rot_dim` features of
// each head, angle = pos * theta^(-2i/rot_dim), pos = row % seq_len. In place.
// inverse = true rotates by the negative angle, which is the backward pass.
// out_bf16 (the cast fused into the rotation): x is only read, and every feature of each head,
// rotated where the rotation applies, is written there rounded to bfloat16 (same layout).
// scaling: YaRN (ops/op_math.hpp), plain RoPE by default.
// Row r is at position first_position + r % seq_len (a decoder's new rows start after its cache).
struct RopeArgs {
  int rows = 0, heads = 0, head_dim = 0, rot_offset = 0, rot_dim = 0, seq_len = 0, first_position = 0;
  float theta = 10000.0f; bool inverse = false;
  float* x = nullptr;  // [rows, heads, head_dim]
  Bf16* out_bf16 = nullptr;
  RopeScaling scaling = {};
};

// Causal softmax attention. q,k: [batch*seq, heads, qk_dim], v and out: [batch*seq, heads, v_dim].
// Row t of a head attends to keys 0..t with probabilities softmax(scale * q_t . k_s). No
// [seq, seq] matrix survives the op: forward saves lse [batch, heads, seq], the log-sum-exp of
// each row's scaled scores, from which backward recomputes the probabilities exp(score - lse).
// `inputs`: fp32 multiplies in fp32 throughout; bf16 and fp8 round what enters each product to
// bfloat16 (q, k, v, dout, the probabilities, the score gradients) and accumulate in fp32, as
// tensor cores do (FP8 training keeps attention in BF16, as DeepSeek-V3 does). The statistics
// (max, sum, lse, D = rowsum(dout * out)) stay fp32.
struct AttentionForwardArgs {
  int batch = 0, seq = 0, heads = 0, qk_dim = 0, v_dim = 0; float scale = 1.0f;
  const float* q = nullptr; const float* k = nullptr; const float* v = nullptr;
  float* out = nullptr; float* lse = nullptr;
  GemmInputs inputs = GemmInputs::fp32;
  // q, k or v stored in bfloat16 (bf16 inputs only, whose rounding leaves them as they are), in
  // place of q, k or v.
  const Bf16* q_bf16 = nullptr; const Bf16* k_bf16 = nullptr; const Bf16* v_bf16 = nullptr;
};
// Takes the forward's out and lse; dq, dk, dv are overwritten.
struct AttentionBackwardArgs {
  int batch = 0, seq = 0, heads = 0, qk_dim = 0, v_dim = 0; float scale = 1.0f;
  const float* q = nullptr; const float* k = nullptr; const float* v = nullptr;
  const float* out = nullptr; const float* lse = nullptr; const float* dout = nullptr;
  float* dq = nullptr; float* dk = nullptr; float* dv = nullptr;
  GemmInputs inputs = GemmInputs::fp32;
  const Bf16* q_bf16 = nullptr; const Bf16* k_bf16 = nullptr; const Bf16* v_bf16 = nullptr;  // as in forward
};

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

// h = silu(gate) * up, elementwise over n values; h_bf16 in place of h: rounded to bfloat16.
struct SwigluForwardArgs {
  size_t n = 0; const float* gate = nullptr; const float* up = nullptr; float* h = nullptr;
  Bf16* h_bf16 = nullptr;
};
struct SwigluBackwardArgs {
  size_t n = 0; const float* gate = nullptr; const float* up = nullptr; const float* dh = nullptr;
  float* dgate = nullptr; float* dup = nullptr;
};

// Per-row softmax cross-entropy. Rows whose target is negative are ignored. Writes each row's
// loss and dlogits = grad_scale * (softmax - onehot); returns the sum of the row losses.
struct CrossEntropyArgs {
  int rows = 0, vocab = 0; float grad_scale = 1.0f;
  const float* logits = nullptr; const int* targets = nullptr;
  float* losses = nullptr; float* dlogits = nullptr;
};

struct EmbeddingForwardArgs { int rows = 0, dim = 0; const int* tokens = nullptr; const float* table = nullptr; float* out = nullptr; };
struct EmbeddingBackwardArgs { int rows = 0, dim = 0; const int* tokens = nullptr; const float* dout = nullptr; float* dtable = nullptr; };

// dst[r, 0:cols] (= or +=) src[r, 0:cols] for r < rows; both are column windows of row-major
// matrices with the given row strides. Splits and joins per-head slices (MLA's [nope; rope]
// keys, grouped-query heads) without a device-specific loop in the layers.
// dst_bf16 in place of dst: the columns rounded to bfloat16 as they are written (not accumulated).
struct CopyColumnsArgs {
  int rows = 0, cols = 0;
  const float* src = nullptr; int src_stride = 0;
  float* dst = nullptr; int dst_stride = 0;
  bool accumulate = false;
  Bf16* dst_bf16 = nullptr;
};

// y += x (n values)
struct AddArgs { size_t n = 0; const float* x = nullptr; float* y = nullptr; };

struct DeviceState;  // opaque per-device state (cuBLASLt handle, stream, workspace); null on CPU
class FallbackCounts;  // ops/fallback_counts.hpp

struct OpTable {
  const char* name;
  // Device memory is ordinary host memory that the host may read (the plain CPU backend):
  // communication can hand device pointers to MPI without staging copies.
  bool host_addressable = false;
  void* (*alloc)(DeviceState*, size_t bytes);
  void (*release)(DeviceState*, void*);
  void (*upload)(DeviceState*, void* dst, const void* src, size_t bytes);
  void (*download)(DeviceState*, void* dst, const void* src, size_t bytes);
  void (*synchronize)(DeviceState*);
  void (*copy)(DeviceState*, void* dst, const void* src, size_t bytes);  // device to device
  void (*zero)(DeviceState*, void* dst, size_t bytes);
  // Time marks: record() notes when the device reaches this point of its op order (a CUDA event;
  // on the CPU, whose ops finish at the call, the clock); seconds() waits until `to` is reached.
  void* (*mark_create)(DeviceState*);
  void (*mark_destroy)(DeviceState*, void* mark);
  void (*mark_record)(DeviceState*, void* mark);
  double (*mark_seconds)(DeviceState*, void* from, void* to);
  // The ops queued on this backend after the call wait until `mark` (recorded on any backend of
  // the same device: another stream) is reached. The host does not wait.
  void (*mark_wait)(DeviceState*, void* mark);

  void (*gemm)(DeviceState*, const GemmArgs&);
  void (*rmsnorm_forward)(DeviceState*, const RmsNormForwardArgs&);
  void (*rmsnorm_backward_input)(DeviceState*, const RmsNormBackwardInputArgs&);
  void (*rmsnorm_backward_weight)(DeviceState*, const RmsNormBackwardWeightArgs&);
  void (*rope)(DeviceState*, const RopeArgs&);
  void (*attention_forward)(DeviceState*, const AttentionForwardArgs&);
  void (*attention_backward)(DeviceState*, const AttentionBackwardArgs&);
  void (*attention_decode)(DeviceState*, const AttentionDecodeArgs&);
  void (*swiglu_forward)(DeviceState*, const SwigluForwardArgs&);
  void (*swiglu_backward)(DeviceState*, const SwigluBackwardArgs&);
  double (*cross_entropy)(DeviceState*, const CrossEntropyArgs&);
  void (*embedding_forward)(DeviceState*, const EmbeddingForwardArgs&);
  void (*embedding_backward)(DeviceState*, const EmbeddingBackwardArgs&);
  void (*add)(DeviceState*, const AddArgs&);
  void (*copy_columns)(DeviceState*, const CopyColumnsArgs&);

  void (*grouped_gemm)(DeviceState*, const GroupedGemmArgs&);
  void (*sigmoid)(DeviceState*, const SigmoidArgs&);
  void (*router_select)(DeviceState*, const RouterSelectArgs&);
  void (*moe_permute)(DeviceState*, const MoePermuteArgs&);
  void (*gather_rows)(DeviceState*, const GatherRowsArgs&);
  void (*moe_combine)(DeviceState*, const MoeCombineArgs&);
  void (*moe_combine_backward)(DeviceState*, const MoeCombineBackwardArgs&);
  double (*balance_loss)(DeviceState*, const BalanceLossArgs&);
  void (*balance_prob_sums)(DeviceState*, const BalanceProbSumsArgs&);
  double (*global_balance)(DeviceState*, const GlobalBalanceArgs&);
  void (*router_backward)(DeviceState*, const RouterBackwardArgs&);
  void (*bias_update)(DeviceState*, const BiasUpdateArgs&);
  void (*shift_tokens)(DeviceState*, const ShiftTokensArgs&);
  void (*scale)(DeviceState*, const ScaleArgs&);
  double (*sum_squares)(DeviceState*, const SumSquaresArgs&);
  void (*adamw)(DeviceState*, const AdamwArgs&);
  void (*fp8_pack_rows)(DeviceState*, const Fp8PackRowsArgs&);
  void (*fp8_unpack_rows)(DeviceState*, const Fp8UnpackRowsArgs&);

  // The GEMMs this device ran another way than its first choice, by kind and shape; null (no
  // entry) for a device with one way only. Read it through backend_fallbacks().
  const FallbackCounts* (*fallbacks)(DeviceState*) = nullptr;
};

// Every arithmetic entry of OpTable, for code that treats them alike (missing_ops, the strict
// backend's guards).
#define MT_OP_LIST(X)                                                                                 \
  X(gemm) X(rmsnorm_forward) X(rmsnorm_backward_input) X(rmsnorm_backward_weight) X(rope)             \
  X(attention_forward) X(attention_backward) X(attention_decode) X(swiglu_forward) X(swiglu_backward) X(cross_entropy)    \
  X(embedding_forward) X(embedding_backward) X(add) X(copy_columns) X(grouped_gemm) X(sigmoid)        \
  X(router_select) X(moe_permute) X(gather_rows) X(moe_combine) X(moe_combine_backward)               \
  X(balance_loss) X(balance_prob_sums) X(global_balance) X(router_backward) X(bias_update)             \
  X(shift_tokens) X(scale) X(sum_squares) X(adamw) X(fp8_pack_rows) X(fp8_unpack_rows)

// Names of the table entries a backend leaves empty (it cannot run the whole model yet).
std::vector<std::string> missing_ops(const OpTable& t);

// A device: its op table and its state. Layers hold a Backend& and call through it.
struct Backend {
  const OpTable* ops = nullptr;
  DeviceState* state = nullptr;

  void gemm(const GemmArgs& a) const { ops->gemm(state, a); }
  void rmsnorm_forward(const RmsNormForwardArgs& a) const { ops->rmsnorm_forward(state, a); }
  void rmsnorm_backward_input(const RmsNormBackwardInputArgs& a) const { ops->rmsnorm_backward_input(state, a); }
  void rmsnorm_backward_weight(const RmsNormBackwardWeightArgs& a) const { ops->rmsnorm_backward_weight(state, a); }
  void rope(const RopeArgs& a) const { ops->rope(state, a); }
  void attention_forward(const AttentionForwardArgs& a) const { ops->attention_forward(state, a); }
  void attention_backward(const AttentionBackwardArgs& a) const { ops->attention_backward(state, a); }
  void attention_decode(const AttentionDecodeArgs& a) const { ops->attention_decode(state, a); }
  void swiglu_forward(const SwigluForwardArgs& a) const { ops->swiglu_forward(state, a); }
  void swiglu_backward(const SwigluBackwardArgs& a) const { ops->swiglu_backward(state, a); }
  double cross_entropy(const CrossEntropyArgs& a) const { return ops->cross_entropy(state, a); }
  void embedding_forward(const EmbeddingForwardArgs& a) const { ops->embedding_forward(state, a); }
  void embedding_backward(const EmbeddingBackwardArgs& a) const { ops->embedding_backward(state, a); }
  void add(const AddArgs& a) const { ops->add(state, a); }
  void copy_columns(const CopyColumnsArgs& a) const { ops->copy_columns(state, a); }
  void grouped_gemm(const GroupedGemmArgs& a) const { ops->grouped_gemm(state, a); }
  void sigmoid(const SigmoidArgs& a) const { ops->sigmoid(state, a); }
  void router_select(const RouterSelectArgs& a) const { ops->router_select(state, a); }
  void moe_permute(const MoePermuteArgs& a) const { ops->moe_permute(state, a); }
  void gather_rows(const GatherRowsArgs& a) const { ops->gather_rows(state, a); }
  void moe_combine(const MoeCombineArgs& a) const { ops->moe_combine(state, a); }
  void moe_combine_backward(const MoeCombineBackwardArgs& a) const { ops->moe_combine_backward(state, a); }
  double balance_loss(const BalanceLossArgs& a) const { return ops->balance_loss(state, a); }
  void balance_prob_sums(const BalanceProbSumsArgs& a) const { ops->balance_prob_sums(state, a); }
  double global_balance(const GlobalBalanceArgs& a) const { return ops->global_balance(state, a); }
  void router_backward(const RouterBackwardArgs& a) const { ops->router_backward(state, a); }
  void bias_update(const BiasUpdateArgs& a) const { ops->bias_update(state, a); }
  void shift_tokens(const ShiftTokensArgs& a) const { ops->shift_tokens(state, a); }
  void scale(const ScaleArgs& a) const { ops->scale(state, a); }
  double sum_squares(const SumSquaresArgs& a) const { return ops->sum_squares(state, a); }
  void adamw(const AdamwArgs& a) const { ops->adamw(state, a); }
  void fp8_pack_rows(const Fp8PackRowsArgs& a) const { ops->fp8_pack_rows(state, a); }
  void fp8_unpack_rows(const Fp8UnpackRowsArgs& a) const { ops->fp8_unpack_rows(state, a); }

  // Memory: device buffers are reached from the host only through these.
  void* alloc(size_t bytes) const { return ops->alloc(state, bytes); }
  void release(void* p) const { ops->release(state, p); }
  void upload(void* dst, const void* src, size_t bytes) const { ops->upload(state, dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) const { ops->download(state, dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) const { ops->copy(state, dst, src, bytes); }
  void zero(void* dst, size_t bytes) const { ops->zero(state, dst, bytes); }
  void synchronize() const { ops->synchronize(state); }
  void* mark_create() const { return ops->mark_create(state); }
  void mark_destroy(void* m) const { ops->mark_destroy(state, m); }
  void mark_record(void* m) const { ops->mark_record(state, m); }
  double mark_seconds(void* from, void* to) const { return ops->mark_seconds(state, from, to); }
  void mark_wait(void* m) const { ops->mark_wait(state, m); }
  bool host_addressable() const { return ops->host_addressable; }
};

const OpTable& cpu_ops();
Backend cpu_backend();

// The CPU op table with device discipline enforced: every buffer it allocates is unreadable
// (mprotect PROT_NONE) except during its own op calls, so host code that touches device memory
// dies at once. Numerically identical to cpu_backend().
// Its ops are queued per backend and run in order only when something needs their results, as on a
// GPU stream that runs behind the host; cpu_strict_stream_create makes another stream of the same
// device (shared memory, its own queue), ordered with the others only by marks.
Backend cpu_strict_backend_create();
void cpu_strict_backend_destroy(Backend& b);
Backend cpu_strict_stream_create(const Backend& first);
void cpu_strict_stream_destroy(Backend& stream);

}  // namespace mt
