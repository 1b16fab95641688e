#pragma once
// Runs one rank's program of a pipeline::Schedule: compute operations on the model's chunks, in
// their slots, each chunk on its own stream, with the payloads between positions in a
// StepMailbox. The forwards add their losses into the step's StepScalars on the device, each
// pass into its own slots; step.hpp's epilogue sums them.
#include <memory>
#include <vector>

#include "model/step_scalars.hpp"
#include "ops/backend/device_timer.hpp"
#include "train/step.hpp"
#include "train/step_mailbox.hpp"

namespace mt {

class StepExecutor {
 public:
  StepExecutor(Model& model, const pipeline::Schedule& schedule, const ParallelGroups& g, const StepPlan& plan,
               const FillMicroBatch& fill, const AfterForward& after_forward, TransferBuffers& buffers,
               StepScalars& scalars);
  ~StepExecutor();
  StepExecutor(const StepExecutor&) = delete;
  StepExecutor& operator=(const StepExecutor&) = delete;

  // Queues the program's passes and then the sum of the forwards' losses; the host waits for none.
  void run(const std::vector<pipeline::Step>& program);
  // The step's times (seconds) into `totals`: waits for the device, so after the step's download.
  void read_times(StepTotals& totals);

 private:
  // A task between its bookkeeping (inputs taken, slot chosen) and its completion (outputs
  // delivered, slot freed): only execute() touches the model, so two may run at once.
  struct Pending {
    pipeline::Task task;
    pipeline::Location loc;
    int slot = -1;
    std::vector<int> tokens, targets;
    LossSums sums;  // a forward's
    Parcel input;  // forward: the previous stage's output; backward: the next stage's input gradient
  };

  // The device's first stream: the pipeline group's transfers queue there.
  const Backend& main() const { return buffers_.backend(); }
  bool last_position(const Pending& p) const { return p.loc.position == pl_.stages - 1; }
  void order_embedding_gradient(const pipeline::Task& t);
  Pending prepare(const pipeline::Task& t);
  // Runs the pass; `close_now` false leaves a forward's gradients to the caller (compute_pair).
  void execute(Pending& p, bool close_now = true);
  void execute_graphed(Pending& p);
  void finish(Pending& p);
  void compute(const pipeline::ComputeOp& op);
  void compute_pair(Pending& f, Pending& b);
  // The pair's forward on a second thread, its gradients left open, beside the backward on this one.
  void run_overlapped(Pending& f, Pending& b);
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
  StepScalars& scalars_;
  int forwards_ = 0;  // forward passes prepared so far
  bool balance_done_ = false;
};

}  // namespace mt
