#include "train/step.hpp"

#include <stdexcept>

#include "model/step_statistics.hpp"
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

namespace {

// The one epilogue of every step: the MoE statistics and the losses summed over the ranks that
// share them, in a fixed order (tensor-parallel token shares first).
StepTotals sum_step(Model& model, const ParallelGroups& g, const StepPlan& plan, const StepExecutor& run) {
  StepTotals totals = run.totals();
  if (!plan.global_balance) {  // a global-batch loss summed them before its first backward
    sum_token_shares(model, *g.tp);
    sum_step_statistics(model, *g.dp);
  }
  // DualPipe's two directions pass each layer on two ranks: the pair's loads add up.
  sum_step_statistics(model, *g.mirror);
  std::vector<double> sums{totals.ce_sum, totals.aux, totals.mtp};
  g.dp->all_reduce_sum(sums);
  sums[1] += run.shared_aux();  // the same on every data-parallel rank
  g.pp->all_reduce_sum(sums);
  totals.ce_sum = sums[0], totals.aux = sums[1], totals.mtp = sums[2];
  return totals;
}

}  // namespace

StepTotals run_step(Model& model, const pipeline::Schedule& schedule, const ParallelGroups& g, const StepPlan& plan,
                    const FillMicroBatch& fill, TransferBuffers& buffers, const AfterForward& after_forward) {
  model.params.zero_grads();
  reset_step_statistics(model);
  StepExecutor run(model, schedule, g, plan, fill, after_forward, buffers);
  run.run(schedule.ranks[g.me.pp]);
  return sum_step(model, g, plan, run);
}

}  // namespace mt
