#pragma once
// The CPU reference implementations of the op table (src/ops/ops.hpp).
#include "ops/ops.hpp"

namespace mt::cpu {

// Time marks of the CPU backends (host_marks.cpp): ops finish at the call, so a mark is the clock.
void* mark_create(DeviceState*);
void mark_destroy(DeviceState*, void* mark);
void mark_record(DeviceState*, void* mark);
double mark_seconds(DeviceState*, void* from, void* to);
void mark_wait(DeviceState*, void* mark);  // nothing to wait for: every op finished at its call

void gemm(DeviceState*, const GemmArgs&);
void rmsnorm_forward(DeviceState*, const RmsNormForwardArgs&);
void rmsnorm_backward_input(DeviceState*, const RmsNormBackwardInputArgs&);
void rmsnorm_backward_weight(DeviceState*, const RmsNormBackwardWeightArgs&);
void rope(DeviceState*, const RopeArgs&);
void attention_forward(DeviceState*, const AttentionForwardArgs&);
void attention_backward(DeviceState*, const AttentionBackwardArgs&);
void attention_decode(DeviceState*, const AttentionDecodeArgs&);
void swiglu_forward(DeviceState*, const SwigluForwardArgs&);
void swiglu_backward(DeviceState*, const SwigluBackwardArgs&);
double cross_entropy(DeviceState*, const CrossEntropyArgs&);
void embedding_forward(DeviceState*, const EmbeddingForwardArgs&);
void embedding_backward(DeviceState*, const EmbeddingBackwardArgs&);
void add(DeviceState*, const AddArgs&);
void copy_columns(DeviceState*, const CopyColumnsArgs&);
void grouped_gemm(DeviceState*, const GroupedGemmArgs&);
void sigmoid(DeviceState*, const SigmoidArgs&);
void router_select(DeviceState*, const RouterSelectArgs&);
void moe_permute(DeviceState*, const MoePermuteArgs&);
void gather_rows(DeviceState*, const GatherRowsArgs&);
void moe_combine(DeviceState*, const MoeCombineArgs&);
void moe_combine_backward(DeviceState*, const MoeCombineBackwardArgs&);
double balance_loss(DeviceState*, const BalanceLossArgs&);
void balance_prob_sums(DeviceState*, const BalanceProbSumsArgs&);
double global_balance(DeviceState*, const GlobalBalanceArgs&);
void router_backward(DeviceState*, const RouterBackwardArgs&);
void bias_update(DeviceState*, const BiasUpdateArgs&);
void shift_tokens(DeviceState*, const ShiftTokensArgs&);
void scale(DeviceState*, const ScaleArgs&);
double sum_squares(DeviceState*, const SumSquaresArgs&);
void adamw(DeviceState*, const AdamwArgs&);
void fp8_pack_rows(DeviceState*, const Fp8PackRowsArgs&);
void fp8_unpack_rows(DeviceState*, const Fp8UnpackRowsArgs&);

}  // namespace mt::cpu
