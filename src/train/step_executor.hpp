#pragma once
// Runs one rank's program of a pipeline::Schedule: compute operations on the model's chunks, in
// their slots, each chunk on its own stream, with the payloads between positions in a
// StepMailbox. What it adds up (losses, times) is this rank's; step.hpp's epilogue sums it.
#include <memory>
#include <vector>

#include "ops/backend/device_timer.hpp"
#include "train/step.hpp"
#include "train/step_mailbox.hpp"

namespace mt {

class StepExecutor {
 public:
  StepExecutor(Model& model, const pipeline::Schedule& schedule, const ParallelGroups& g, const StepPlan& plan,
               const FillMicroBatch& fill, const AfterForward& after_forward, TransferBuffers& buffers);

  void run(const std::vector<pipeline::Step>& program);
  const StepTotals& totals() const { return totals_; }
  // A global-batch balance loss: the same on every data-parallel rank (not summed over them).
  double shared_aux() const { return shared_aux_; }

 private:
  // A task between its bookkeeping (inputs taken, slot chosen) and its completion (outputs
  // delivered, slot freed): only execute() touches the model, so two may run at once.
  struct Pending {
    pipeline::Task task;
    pipeline::Location loc;
    int slot = -1;
    std::vector<int> tokens, targets;
    Parcel input;  // forward: the previous stage's output; backward: the next stage's input gradient
    ForwardResult result;
  };

  // The device's first stream: the pipeline group's transfers queue there.
  const Backend& main() const { return buffers_.backend(); }
  bool last_position(const Pending& p) const { return p.loc.position == pl_.stages - 1; }
  void order_embedding_gradient(const pipeline::Task& t);
  Pending prepare(const pipeline::Task& t);
  void execute(Pending& p);
  void execute_graphed(Pending& p);
  void finish(Pending& p);
  void add_forward_result(const ForwardResult& r);
  void compute(const pipeline::ComputeOp& op);
  void compute_pair(Pending& f, Pending& b);
  void finish_global_balance_once();

  Model& model_;
  const pipeline::Placement& pl_;
  const ParallelGroups& g_;
  int me_;
  const StepPlan& plan_;
  const FillMicroBatch& fill_;
  const AfterForward& after_forward_;
  TransferBuffers& buffers_;
  StepMailbox mailbox_;
  std::vector<std::unique_ptr<DeviceTimer>> forward_time_, backward_time_;  // per chunk, on its stream
  DeviceTimer overlapped_time_;                                             // on the first stream
  std::vector<int> embedding_chunks_;  // this rank's chunks at the first or last position
  bool concurrent_;
  std::vector<std::vector<int>> free_slots_, slot_of_;
  StepTotals totals_;
  bool balance_done_ = false;
  double shared_aux_ = 0;
};

}  // namespace mt
