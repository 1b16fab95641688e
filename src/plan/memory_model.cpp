// Activation bytes per token as the planner models them: per layer, for the whole model, and the
// BF16 recipe's activations on a rank (moetrain's own storage is parallel/storage_model.cpp).
#include "plan/memory_model.hpp"

#include <algorithm>
#include <cmath>

#include "model/flops.hpp"
#include "plan/cost_model.hpp"

namespace mt::plan {

namespace {

// Activation bytes one token leaves saved in one layer for backward (BF16), before tensor
// parallelism divides them: layer inputs, normalized inputs, projections and FFN intermediates.
// `routed`: the rows a MoE layer's routed experts hold per token (top_k; the reserved arrivals under
// expert parallelism).
struct LayerActivations {
  double attention;  // split by tensor (sequence) parallelism
  double ffn;        // dense FFN: split by tensor parallelism; MoE: not split
};
LayerActivations layer_activations(const ModelConfig& m, bool moe, const Layout& l, double routed) {
  const auto& a = m.attention;
  const double d = m.d_model, H = m.n_heads;
  const bool selective = l.recompute == Recompute::selective;
  double attn;  // values per token
  if (a.kind == AttentionKind::mla) {
    // Layer input, normalized input, latents, per-head q/k/v from the up-projections, output.
    const double heads = H * (2.0 * (a.qk_nope_head_dim + a.qk_rope_head_dim) + a.v_head_dim);
    attn = 2 * d + a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim + H * a.v_head_dim + (selective ? 0 : heads);
  } else {
    attn = 2 * d + 2.0 * H * m.head_dim + 2.0 * (a.n_kv_heads > 0 ? a.n_kv_heads : H) * m.head_dim;
  }
  const double experts = moe ? routed + m.moe.n_shared_experts : 1;
  const double hidden = moe ? m.moe.expert_hidden : m.ffn_hidden;
  // FFN input per expert copy, gate and up outputs, their SwiGLU product (recomputed when selective).
  double ffn = 2 * d + experts * (d + (selective ? 2 : 3) * hidden);
  // Selective recompute also redoes the RMSNorms (DeepSeek-V3 report §3.2.3).
  if (selective) attn -= d, ffn -= d;
  // FP8 training caches the FFN inputs in FP8 (DeepSeek-V3 report §3.3, low-precision storage).
  const double ffn_bytes = l.fp8 ? 1 : 2;
  return {2 * attn, ffn_bytes * ffn + (moe ? 4.0 * m.moe.n_routed_experts : 0)};
}

// Activation bytes one token leaves in all layers (MTP blocks included) on one tensor-parallel
// rank, under the layout's recomputation and precision.
double model_activations_per_token(const ModelConfig& m, const Layout& l, double routed) {
  const int moe_blocks = moe_layer_count(m), dense_blocks = m.n_layers + m.mtp.depth - moe_blocks;
  const LayerActivations dense = layer_activations(m, false, l, routed), moe = layer_activations(m, true, l, routed);
  return dense_blocks * (dense.attention + dense.ffn) / l.tp + moe_blocks * (moe.attention / l.tp + moe.ffn);
}

// The recipe's activations with room for `routed` rows per token in each MoE layer.
double recipe_values(const ModelConfig& m, const Layout& l, double T, int pieces, int live, double routed) {
  double per_token_piece = model_activations_per_token(m, l, routed) / pieces;
  if (l.recompute == Recompute::full) {
    // Only each layer's input is kept (BF16; under sequence parallelism its 1/tp of the rows); one
    // layer is rebuilt at a time during backward.
    Layout plain = l;
    plain.recompute = Recompute::none;
    LayerActivations a = layer_activations(m, moe_layer_count(m) > 0, plain, routed);
    const double layers_per_piece = double(m.n_layers + m.mtp.depth) / pieces;
    const double input_share = l.sp && l.tp > 1 ? 1.0 / l.tp : 1.0;
    per_token_piece = 2.0 * m.d_model * layers_per_piece * input_share +
                      (a.attention + a.ffn) / l.tp / std::max(1.0, double(live));
  }
  // FP32 logits, split over the tensor-parallel ranks by vocabulary; chunked as moetrain's.
  const HeadLogits logits = head_logits_values(m, T);
  return per_token_piece * T * live + (logits.per_microbatch + logits.once) * 4.0 / l.tp;
}

}  // namespace

RecipeActivations recipe_activations(const ModelConfig& m, const Layout& l, double T, int pieces, int live) {
  const double average = m.moe.top_k, reserved = ep_rows_per_token(m, l);
  const double bytes = recipe_values(m, l, T, pieces, live, reserved);
  return {bytes, reserved == average ? 0 : bytes - recipe_values(m, l, T, pieces, live, average)};
}

double activation_bytes_per_token(const ModelConfig& m, const Layout& l) {
  return model_activations_per_token(m, l, m.moe.top_k);
}


}  // namespace mt::plan
