#pragma once
// The end of an optimizer step, after the gradients are accumulated: the sum of gradients over
// their copies, global-norm clipping, AdamW, and the auxiliary-loss-free bias update of every
// MoE layer from the step's load. All of it is queued on the device, which decides the clipping
// and whether the update applies from the step's scalars; the host reads the outcome after the
// step's one download.
#include <vector>

#include "config/config.hpp"
#include "model/model.hpp"
#include "model/step_scalars.hpp"
#include "ops/backend/device_timer.hpp"
#include "train/lr_schedule.hpp"
#include "train/optimizer.hpp"
#include "train/qk_clip.hpp"

namespace mt {

struct UpdateStats {
  double grad_norm = 0;             // before clipping
  double time_grad_sync = 0;        // seconds summing gradients over their copies
  double lr = 0;
  std::vector<float> expert_load;   // [moe layers * experts] fraction of the step's routed tokens
  std::vector<float> expert_bias;   // [moe layers * experts] after the update
  bool applied = false;             // false: the gradient norm or the loss was not finite, nothing changed
  // With QK-Clip, per attention layer (blocks, then MTP modules): the step's largest logit over the
  // layer's heads and the heads clipped (QkClip::record); empty without it.
  std::vector<float> max_logit, clipped_heads;
};

// Queues the update of step `step` (0-based; its learning rate that of `lr_cycle`, returned). The
// gradient sums are timed by `sync_time`. Unless the gradient norm and the loss (scalars' guard) are
// finite, the device leaves weights, moments and biases as they were. Its launches are the same every
// step (AdamW reads the step's coefficients from device memory), so with `graph` (training.cuda_graph,
// on the model's first stream) they run as one graph, named "update", after the first step; the gradient
// sums are then not timed apart. `qk_clip` (optimizer.qk_clip) rescales query and key rows after the step.
double queue_update(Model& model, Optimizer& optimizer, const Config& cfg, const LrCycle& lr_cycle, long long step,
                    const StepScalars& scalars, DeviceTimer& sync_time, GraphCapture* graph = nullptr,
                    QkClip* qk_clip = nullptr);
// After the step's download: what the update did. Collective over the pipeline group (and with
// `qk_clip` the tensor-parallel group).
UpdateStats update_record(Model& model, const Optimizer& optimizer, const Config& cfg, const StepScalars& scalars,
                          double lr, const QkClip* qk_clip = nullptr);
// Both, with the download between them, for gradients accumulated outside a training step (dump-step).
UpdateStats apply_update(Model& model, Optimizer& optimizer, const Config& cfg, const LrCycle& lr_cycle,
                         long long step, QkClip* qk_clip = nullptr);

}  // namespace mt
