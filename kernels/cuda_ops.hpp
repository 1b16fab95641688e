#pragma once
// The CUDA implementations of the op table (src/ops/ops.hpp); kernels/cuda_backend.cu puts them
// in the table. Entries not declared here are still missing on CUDA (see missing_ops()).
#include "ops/ops.hpp"

namespace mt::cuda {

void gemm(DeviceState*, const GemmArgs&);
void rmsnorm_forward(DeviceState*, const RmsNormForwardArgs&);
void rmsnorm_backward_input(DeviceState*, const RmsNormBackwardInputArgs&);
void rmsnorm_backward_weight(DeviceState*, const RmsNormBackwardWeightArgs&);
void attention_forward(DeviceState*, const AttentionForwardArgs&);
void attention_backward(DeviceState*, const AttentionBackwardArgs&);
void attention_decode(DeviceState*, const AttentionDecodeArgs&);
void rope(DeviceState*, const RopeArgs&);
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

}  // namespace mt::cuda
