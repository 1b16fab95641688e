#pragma once
#include <vector>

#include "config/config.hpp"

namespace mt {
// Parameters a token passes through in matrix products (embedding lookup excluded; routed
// experts counted top_k times, not n_routed_experts times).
double active_matmul_params(const ModelConfig& m);
// Matrix parameters of one attention layer (MHA with its key/value heads, or MLA).
double attention_matmul_params(const ModelConfig& m);
// Training FLOPs per token = 6 * active_matmul_params + 3 * n_layers * n_heads * (qk + v) * seq_len,
// qk and v the per-head query/key and value widths. The second term is causal attention (QK^T
// and PV over the lower triangle: half of PaLM's 12 L H Q T for MHA), forward plus backward.
double training_flops_per_token(const ModelConfig& m);
// The attention-core part of one token's forward FLOPs (QK^T and PV, causal), all layers and MTP.
double attention_core_forward_flops_per_token(const ModelConfig& m);
// Routed-expert parameters (all experts, all MoE layers including MTP blocks).
double routed_expert_params(const ModelConfig& m);
// MoE layers, counting MTP blocks.
int moe_layer_count(const ModelConfig& m);
// One token's forward FLOPs per pipeline block, in model order: each layer, the output head,
// then each MTP module (its projection, block and pass through the shared head). They sum to
// training_flops_per_token / 3.
std::vector<double> forward_flops_per_block(const ModelConfig& m);
// All parameters (total, not per token).
double total_params(const ModelConfig& m);
}  // namespace mt
