#include "train/accumulate.hpp"

#include "comm/comm.hpp"

namespace mt {

StepTotals accumulate_gradients(Model& model, int global_batch, int micro_batch, const FillMicroBatch& fill,
                                const AfterForward& after_forward) {
  const ModelConfig& m = model.config();
  const StepPlan plan = plan_step(m, global_batch, micro_batch);
  const pipeline::Schedule schedule = step_schedule(ParallelConfig{}, plan);
  const std::unique_ptr<Comm> one_rank = make_local_comm();
  const ParallelGroups groups = make_groups(*one_rank, {}, model.backend());
  TransferBuffers buffers(model.backend(), size_t(micro_batch) * m.seq_len * m.d_model);
  return run_step(model, schedule, groups, plan, fill, buffers, after_forward);
}

}  // namespace mt
