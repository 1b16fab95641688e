#pragma once
// The learning rate of each optimizer step, and what a resumed run does with a schedule whose decay is over.
#include <string>

#include "config/config.hpp"

namespace mt {

// A cycle of the schedule: warmup from step `start`, then cosine decay to min_lr_ratio * lr at step `end`,
// held there after it. A run's first cycle is [0, training.steps]; lr_schedule.extend = "rewarm" starts
// another where the previous one ended.
struct LrCycle {
  long long start = 0, end = 0;
};

// Learning rate for optimizer step `step` (0-based) of `cycle`: the first cycle warms up linearly from
// lr/warmup to lr over warmup_steps, a later one from the final lr; then cosine (or constant) decay.
double learning_rate(const Config& cfg, const LrCycle& cycle, long long step);
// The same for a run that trains its configured steps in one cycle.
double learning_rate(const Config& cfg, long long step);

// The cycle a run resumed at `step` follows. `saved`: the checkpoint's cycle (end 0 if it has none);
// `saved_steps`: the checkpoint's training.steps. A decay still under way stretches to this run's
// training.steps; one that is over and a higher training.steps follow lr_schedule.extend, and
// "refuse" is a UserError naming the checkpoint, the key and its choices.
LrCycle resumed_lr_cycle(const Config& cfg, LrCycle saved, long long saved_steps, long long step,
                         const std::string& checkpoint);

}  // namespace mt
