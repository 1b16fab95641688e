#pragma once
// Activation memory of a layout stored as the BF16 recipe (Storage::bf16_recipe); moetrain's own
// storage is parallel/storage_model.hpp's trainer_memory.
#include "config/config.hpp"
#include "parallel/layout.hpp"

namespace mt::plan {

// The BF16 recipe's activation bytes on a rank: `live` micro-batches of its `pieces`' saved tensors
// (`tokens` of each on this rank), and the logits.
double recipe_activations(const ModelConfig& m, const Layout& l, double tokens, int pieces, int live);

}  // namespace mt::plan
