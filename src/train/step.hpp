#pragma once
// One optimizer step's forward and backward passes on a rank, for every layout: the rank's
// program in a pipeline::Schedule (one stage of one chunk without a pipeline) runs through the
// step executor, then one epilogue sums the step's MoE statistics over the ranks that share them on
// the device, queues the update, downloads the step's scalars once and sums the losses over the ranks
// on the host. Gradients stay this rank's: the optimizer sums them over their copies.
#include <functional>
#include <vector>

#include "config/config.hpp"
#include "model/model.hpp"
#include "model/step_scalars.hpp"
#include "parallel/groups.hpp"
#include "pipeline/schedule.hpp"
#include "train/step_plan.hpp"
#include "train/transfer_buffers.hpp"

namespace mt {

struct StepTotals {
  double ce_sum = 0;     // cross-entropy summed over the step's tokens
  double aux = 0;        // the balance-loss term of the objective
  double mtp = 0;        // mean over MTP depths of the cross-entropy (the objective adds weight * mtp)
  double t_forward = 0, t_backward = 0;  // seconds
  double t_overlapped = 0;               // wall seconds of overlapped F&B pairs (DualPipe)
  double t_pipeline_wait = 0;            // seconds waiting for pipeline transfers
};

// fill(mb, inputs, targets) writes micro-batch mb's tokens ([micro_batch*seq_len] each); mb
// counts over the whole step.
using FillMicroBatch = std::function<void(int mb, std::vector<int>& inputs, std::vector<int>& targets)>;
// after_forward(mb, slot), if given, runs after each forward on the last stage (e.g. to read the
// slot's logits).
using AfterForward = std::function<void(int mb, int slot)>;

// The step's schedule: parallel.schedule over parallel.pp ranks, or without a pipeline (pp = 1,
// "1f1b") one stage running its micro-batches one after another, every forward first for a
// global-batch balance loss. One that fails its check is a bug: std::logic_error.
pipeline::Schedule step_schedule(const ParallelConfig& p, const StepPlan& plan);
// Whether the schedule cuts the model in more than one stage or chunk.
bool pipelined(const pipeline::Schedule& s);
// The forward passes in pipeline rank `rank`'s program (StepScalars' forwards).
int forward_passes(const pipeline::Schedule& s, int rank);
// The step's scalars of `model` under the schedule and plan, for this rank.
StepScalars make_step_scalars(Model& model, const pipeline::Schedule& s, const StepPlan& plan, int rank);

// Runs this rank's part of the step: the plan's micro-batches, DualPipe's second direction the
// second half of them, then `update` (queued ops: the optimizer), then the one download of
// `scalars` (make_step_scalars). Returns the step's totals summed over the pipeline and
// data-parallel groups, so every rank reports the same loss; the MoE statistics are the step's
// sums too.
StepTotals run_step(Model& model, const pipeline::Schedule& schedule, const ParallelGroups& groups,
                    const StepPlan& plan, const FillMicroBatch& fill, TransferBuffers& buffers, StepScalars& scalars,
                    const AfterForward& after_forward = {}, const std::function<void()>& update = {});

}  // namespace mt
