#pragma once
// One optimizer step's forward and backward passes on a pipeline rank, run from the rank's
// program in a pipeline::Schedule: compute operations on the model's chunks, and the
// activation and gradient exchanges between ranks as non-blocking sends and receives posted
// where the schedule posts them, over the pipeline group's DeviceComm from device buffers. A
// transfer between two chunks of the same rank (DualPipeV's turn) is handed over in memory.
#include <vector>

#include "ops/mark.hpp"
#include "parallel/groups.hpp"
#include "pipeline/schedule.hpp"
#include "train/accumulate.hpp"

namespace mt {

// Device buffers of one pipeline transfer (a micro-batch's activations or their gradient), kept
// from step to step: a GPU allocation synchronizes the device, so a step allocates only when it
// has more transfers in flight than any step before. `backend` is the device's first stream, on
// which the pipeline group communicates; the chunks' streams write and read the buffers too, so
// each spare buffer keeps the mark after its last use.
class TransferBuffers {
 public:
  TransferBuffers(const Backend& backend, size_t floats) : backend_(backend), floats_(floats) {}
  // A buffer for `writer` to fill: writer's stream first waits for the buffer's last use.
  Buffer take(const Backend& writer);
  // Back to the spares once the ops queued on `last_user` so far are done with it.
  void give(Buffer b, const Backend& last_user) { spare_.push_back({std::move(b), Mark::recorded(last_user)}); }
  const Backend& backend() const { return backend_; }

 private:
  struct Spare {
    Buffer buffer;
    Mark released;
  };
  Backend backend_;
  size_t floats_;
  std::vector<Spare> spare_;
};

// Runs this rank's part of the step: data-parallel rank d runs micro-batches
// [d*n, (d+1)*n) of the step (n = global_batch / micro_batch / dp), DualPipe's second direction
// the second half of them. Returns the step's totals summed over the pipeline and data-parallel
// groups, so every rank reports the same loss. Gradients stay this rank's.
StepTotals pipeline_step(Model& model, const pipeline::Schedule& schedule, const ParallelGroups& groups,
                         int global_batch, int micro_batch, const FillMicroBatch& fill, TransferBuffers& buffers);

// Forward passes only, through every stage in order (evaluation): returns the summed
// cross-entropy and token count of `sequences` sequences, run in micro-batches of `micro_batch`
// (the last holding the remainder), on every rank. fill(first, count, ...) gives sequences
// first..first+count-1.
using FillSequences = std::function<void(int first, int count, std::vector<int>& inputs, std::vector<int>& targets)>;
std::pair<double, long> pipeline_forward_only(Model& model, const pipeline::Placement& placement,
                                              const ParallelGroups& groups, int sequences, int micro_batch,
                                              const FillSequences& fill, TransferBuffers& buffers);

}  // namespace mt
