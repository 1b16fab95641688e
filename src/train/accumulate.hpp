#pragma once
// One optimizer step's forward and backward passes of a model on one rank, without a pipeline
// (dump-step, tests): run_step over one-rank groups and a one-stage schedule.
#include "train/step.hpp"

namespace mt {

// Zeroes the gradients and the MoE statistics, then accumulates the step's gradients over its
// micro-batches of `micro_batch` sequences; the model needs plan_step's slots().
StepTotals accumulate_gradients(Model& model, int global_batch, int micro_batch, const FillMicroBatch& fill,
                                const AfterForward& after_forward = {});

}  // namespace mt
