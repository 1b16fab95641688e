#pragma once
// Which stages of the model each pipeline rank holds. The layers are cut as pipeline_cut cuts them
// (the planner's cut: contiguous, the heaviest stage as light as it can be); the embedding goes
// with the first stage, the final norm, head, loss and MTP modules with the last. Chunk c of rank r is the stage at
// placement.locate(r, c), so a schedule's chunk numbers index the model's chunks directly.
#include <vector>

#include "config/config.hpp"
#include "model/model.hpp"
#include "pipeline/schedule.hpp"

namespace mt {

std::vector<StageSpec> stages_of(const ModelConfig& m, const pipeline::Placement& placement, int pp_rank);

}  // namespace mt
