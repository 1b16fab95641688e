#pragma once
// The shape of one training step under a layout, which every cost term reads: where the schedule puts
// the model's pieces, the micro-batches of a pipeline and the tokens one rank holds of each.
#include "config/config.hpp"
#include "parallel/layout.hpp"
#include "parallel/storage_model.hpp"
#include "pipeline/schedule.hpp"

namespace mt::plan {

struct StepShape {
  int pieces = 0;             // the pieces the model is cut into
  int held = 0;               // the pieces one rank holds
  int microbatches = 0;       // per pipeline, per step
  double tokens = 0;          // of one micro-batch on one rank: a context-parallel rank holds 1/cp of each sequence
  double layers_per_piece = 0, moe_per_piece = 0;
  bool paired = false;        // DualPipe or DualPipeV: a forward and a backward run as one overlapped pair
};
StepShape step_shape(const ModelConfig& m, int global_batch, const Layout& l);

}  // namespace mt::plan
