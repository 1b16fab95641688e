#include "train/step_plan.hpp"

#include "config/micro_batches.hpp"

namespace mt {

namespace {
// The objective's weights for a step of `global_batch` sequences in micro-batches of `micro_batch`.
LossScales loss_scales(const ModelConfig& m, int global_batch, int micro_batch) {
  const BalanceLoss kind = m.moe.aux_loss;
  const float groups = kind == BalanceLoss::sequence      ? float(global_batch)
                       : kind == BalanceLoss::micro_batch ? float(global_batch / micro_batch)
                                                          : 1.0f;
  const float mtp = m.mtp.depth > 0 ? float(m.mtp.weight / (m.mtp.depth * double(global_batch))) : 0.0f;
  return {1.0f / float(global_batch * m.seq_len), 1.0f / groups, mtp};
}
}  // namespace

StepPlan plan_step(const ModelConfig& m, int global_batch, int micro_batch, int dp, int dp_rank) {
  StepPlan p;
  p.global_batch = global_batch;
  p.micro_batch = micro_batch;
  p.micro_batches = micro_batches_per_rank(global_batch, micro_batch, dp);
  p.first = dp_rank * p.micro_batches;
  p.global_balance = m.moe.aux_loss == BalanceLoss::global_batch;
  p.scales = loss_scales(m, global_batch, micro_batch);
  return p;
}

int slots_needed(const ModelConfig& m, int global_batch, int micro_batch, int dp) {
  return plan_step(m, global_batch, micro_batch, dp).slots();
}

}  // namespace mt
