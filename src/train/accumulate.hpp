#pragma once
// One optimizer step's forward and backward passes over its micro-batches: zeroes the
// gradients and the MoE load counters, then accumulates the step's gradients. With a global-batch balance loss every forward runs
// first (each micro-batch in its own slot), then the balance loss is fixed, then the backwards.
#include <functional>
#include <vector>

#include "config/config.hpp"
#include "model/model.hpp"

namespace mt {

class Comm;

struct StepTotals {
  double ce_sum = 0;     // cross-entropy summed over the step's tokens
  double aux = 0;        // the balance-loss term of the objective
  double mtp = 0;        // mean over MTP depths of the cross-entropy (the objective adds weight * mtp)
  double t_forward = 0, t_backward = 0;  // seconds
  double t_overlapped = 0;               // wall seconds of overlapped F&B pairs (DualPipe)
  double t_pipeline_wait = 0;            // seconds waiting for pipeline transfers
};

// The objective's weights for a step of `global_batch` sequences in micro-batches of `micro_batch`.
LossScales loss_scales(const ModelConfig& m, int global_batch, int micro_batch);
// Slots the model needs for this config (every micro-batch a rank runs in a step, for a
// global-batch loss).
int slots_needed(const ModelConfig& m, int global_batch, int micro_batch, int dp = 1);

// Zeroes the gradients and the MoE layers' step statistics.
void start_step(Model& model);
// Adds a micro-batch's forward to the step's totals.
void add_forward_result(StepTotals& totals, const ForwardResult& r, const ModelConfig& m, int global_batch);
// Sums the step's MoE statistics over `group`: the load, and for a global-batch balance loss the
// routing-probability sums.
void sum_moe_statistics(Model& model, Comm& group);
// Under tensor parallelism each rank sends its share of the tokens to the experts: the step's
// loads add up over `tp` (first, before any other sum of the statistics).
void sum_token_shares(Model& model, Comm& tp);
// Fixes the global-batch balance loss of every MoE layer the rank holds, once the statistics
// of the whole step are in; returns the loss.
double finish_global_balance(Model& model, int global_batch);

// fill(mb, inputs, targets) writes micro-batch mb's tokens ([micro_batch*seq_len] each).
using FillMicroBatch = std::function<void(int mb, std::vector<int>& inputs, std::vector<int>& targets)>;
// after_forward(mb, slot), if given, runs after each forward (e.g. to read the slot's logits).
// With a data-parallel group `dp` of n ranks, rank r runs the r-th n-th of the step's
// micro-batches (mb numbers stay global), and the returned totals and the MoE load are sums over
// the group. The gradients stay this rank's: the optimizer sums them over their copies. `tp`: the
// tensor-parallel group, over which the MoE splits each micro-batch's tokens.
StepTotals accumulate_gradients(Model& model, int global_batch, int micro_batch, const FillMicroBatch& fill,
                                const std::function<void(int mb, int slot)>& after_forward = {}, Comm* dp = nullptr,
                                Comm* tp = nullptr);

}  // namespace mt
