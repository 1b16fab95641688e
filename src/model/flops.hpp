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
// How a pipeline of `stages` stages cuts the model, the same in the trainer and the planner:
// stage s holds layers [cut[s], cut[s+1]) (cut has stages + 1 entries), the first also the
// embedding, the last also the final norm, head and MTP modules. Contiguous, at least one layer
// per stage, the heaviest stage's forward FLOPs as small as they can be. Needs stages <= n_layers.
std::vector<int> pipeline_cut(const ModelConfig& m, int stages);
// One token's forward FLOPs in each stage of a cut.
std::vector<double> stage_forward_flops(const ModelConfig& m, const std::vector<int>& cut);
// All parameters (total, not per token).
double total_params(const ModelConfig& m);
}  // namespace mt
