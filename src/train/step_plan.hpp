#pragma once
// What one optimizer step runs on this rank: its share of the step's micro-batches, where each
// one's samples start, and the objective's weights. Built once, by plan_step(), and read by
// every part of the step (the schedule, the executor, the data, the epilogue).
#include "config/config.hpp"
#include "model/model.hpp"

namespace mt {

struct StepPlan {
  int global_batch = 0, micro_batch = 0;  // sequences
  int micro_batches = 0;                  // this rank's: global_batch / micro_batch / dp
  int first = 0;                          // the global number of this rank's first micro-batch
  bool global_balance = false;            // every forward first, then the balance loss, then the backwards
  LossScales scales;
  // Where micro-batch `mb` (numbered over the whole step) starts among the step's samples.
  long long first_sample(int mb) const { return (long long)mb * micro_batch; }
  // The activation slots one rank's model needs (every micro-batch at once for a global-batch loss).
  int slots() const { return global_balance ? micro_batches : 1; }
};

// The step of data-parallel rank `dp_rank` of `dp`.
StepPlan plan_step(const ModelConfig& m, int global_batch, int micro_batch, int dp = 1, int dp_rank = 0);

// Slots the model needs for this config: plan_step's slots().
int slots_needed(const ModelConfig& m, int global_batch, int micro_batch, int dp = 1);

}  // namespace mt
