#pragma once
// Activation memory of a layout stored as the BF16 recipe (Storage::bf16_recipe); moetrain's own
// storage is parallel/storage_model.hpp's trainer_memory.
#include "config/config.hpp"
#include "parallel/layout.hpp"
#include "parallel/storage_model.hpp"

namespace mt::plan {

struct RecipeActivations {
  double bytes = 0;
  // Of them: what room for the expert-parallel arrivals l.ep_receive_bound reserves costs over room
  // for the average arrivals (as RankMemory::ep_headroom).
  double ep_headroom = 0;
};

// The BF16 recipe's activation bytes on a rank: `live` micro-batches of its `pieces`' saved tensors
// (`tokens` of each on this rank), each MoE layer with room for the arrivals l.ep_receive_bound
// reserves (parallel/storage_model.hpp's ep_rows_per_token), and the logits as moetrain keeps them
// (head_logits_values: one chunk's under model.head_chunk_tokens).
RecipeActivations recipe_activations(const ModelConfig& m, const Layout& l, double tokens, int pieces, int live);

}  // namespace mt::plan
