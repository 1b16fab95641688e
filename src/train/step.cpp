#include "train/step.hpp"

#include <stdexcept>

#include "model/step_statistics.hpp"
#include "ops/backend/mark.hpp"
#include "pipeline/check.hpp"
#include "pipeline/generators.hpp"
#include "train/step_executor.hpp"

namespace mt {

pipeline::Schedule step_schedule(const ParallelConfig& p, const StepPlan& plan) {
  const bool one_stage = p.pp == 1 && p.schedule == pipeline::Kind::one_f_one_b;
  // One stage: GPipe's order is every forward, then every backward; 1F1B's a forward and its backward.
  const pipeline::Kind kind = !one_stage ? p.schedule
                              : plan.global_balance ? pipeline::Kind::gpipe
                                                    : pipeline::Kind::one_f_one_b;
  pipeline::Schedule s = pipeline::make_schedule({kind, p.pp, plan.micro_batches, one_stage ? 1 : p.vpp});
  // The executor trusts the programs: one the checker rejects (a transfer missing, a deadlock,
  // receives posted out of their send order) never starts.
  if (const auto problems = pipeline::check_schedule(s); !problems.empty())
    throw std::logic_error("the " + pipeline::kind_name(kind) + " schedule fails its check: " + problems[0]);
  return s;
}

bool pipelined(const pipeline::Schedule& s) { return s.placement.stages > 1 || s.placement.chunks_per_rank > 1; }

int forward_passes(const pipeline::Schedule& s, int rank) {
  int n = 0;
  for (const pipeline::Step& step : s.ranks[size_t(rank)])
    if (auto* op = std::get_if<pipeline::ComputeOp>(&step)) n += op->task.pass == pipeline::Pass::forward;
  return n;
}

StepScalars make_step_scalars(Model& model, const pipeline::Schedule& s, const StepPlan& plan, int rank) {
  return StepScalars(model, forward_passes(s, rank), double(model.config().mtp.depth) * plan.global_batch);
}

namespace {

// The MoE statistics summed over the ranks that share them, on the device, in a fixed order
// (tensor-parallel token shares first).
void sum_statistics(Model& model, const ParallelGroups& g, const StepPlan& plan) {
  if (!plan.global_balance) {  // a global-batch loss summed them before its first backward
    sum_token_shares(model, *g.dev.tp);
    sum_step_statistics(model, *g.dev.dp);
  }
  // DualPipe's two directions pass each layer on two ranks: the pair's loads add up.
  sum_step_statistics(model, *g.dev.mirror);
}

// The losses, once the step's scalars are on the host, summed over the ranks that share them.
StepTotals sum_losses(const ParallelGroups& g, const StepScalars& s) {
  std::vector<double> sums{s.value(StepScalars::ce), s.value(StepScalars::aux), s.value(StepScalars::mtp)};
  g.dp->all_reduce_sum(sums);
  sums[1] += s.value(StepScalars::global_aux);  // the same on every data-parallel rank
  g.pp->all_reduce_sum(sums);
  StepTotals totals;
  totals.ce_sum = sums[0], totals.aux = sums[1], totals.mtp = sums[2];
  return totals;
}

}  // namespace

StepTotals run_step(Model& model, const pipeline::Schedule& schedule, const ParallelGroups& g, const StepPlan& plan,
                    const FillMicroBatch& fill, TransferBuffers& buffers, StepScalars& scalars,
                    const AfterForward& after_forward, const std::function<void()>& update) {
  model.params.zero_grads();
  reset_step_statistics(model);
  scalars.zero();
  order_after(buffers.backend(), model.backend());  // the chunks start after the first stream
  buffers.settle();
  StepExecutor run(model, schedule, g, plan, fill, after_forward, buffers, scalars);
  run.run(schedule.ranks[g.me.pp]);
  sum_statistics(model, g, plan);
  if (update) update();
  scalars.download();
  StepTotals totals = sum_losses(g, scalars);
  run.read_times(totals);
  return totals;
}

}  // namespace mt
