#include "train/accumulate.hpp"

#include "runtime/one_rank.hpp"

namespace mt {

StepTotals accumulate_gradients(Model& model, int global_batch, int micro_batch, const FillMicroBatch& fill,
                                const AfterForward& after_forward) {
  const ModelConfig& m = model.config();
  const StepPlan plan = plan_step(m, global_batch, micro_batch);
  const pipeline::Schedule schedule = step_schedule(ParallelConfig{}, plan);
  const OneRank one(model.backend());
  TransferBuffers buffers(model.backend(), size_t(micro_batch) * m.seq_len * m.d_model);
  StepScalars scalars = make_step_scalars(model, schedule, plan, 0);
  return run_step(model, schedule, one.groups, plan, fill, buffers, scalars, after_forward);
}

}  // namespace mt
