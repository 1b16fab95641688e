#pragma once
// The end of an optimizer step, after the gradients are accumulated: the sum of gradients over
// their copies, global-norm clipping, AdamW, and the auxiliary-loss-free bias update of every
// MoE layer from the step's load.
#include <vector>

#include "config/config.hpp"
#include "model/model.hpp"
#include "train/lr_schedule.hpp"
#include "train/optimizer.hpp"

namespace mt {

struct UpdateStats {
  double grad_norm = 0;             // before clipping
  double time_grad_sync = 0;        // seconds summing gradients over their copies
  double lr = 0;
  std::vector<float> expert_load;   // [moe layers * experts] fraction of the step's routed tokens
  std::vector<float> expert_bias;   // [moe layers * experts] after the update
  bool applied = false;             // false: the gradient norm was not finite, nothing changed
};

// `step` is the 0-based index of the optimizer step being completed, its learning rate that of
// `lr_cycle`. A gradient norm that is not finite stops before anything is updated: weights, moments
// and biases stay as they were.
UpdateStats apply_update(Model& model, Optimizer& optimizer, const Config& cfg, const LrCycle& lr_cycle,
                         long long step);

}  // namespace mt
