#pragma once
// The payloads of one rank's step in flight: activations and gradients between pipeline
// positions, exchanged with other ranks as non-blocking sends and receives where the schedule
// posts them, over the pipeline group's DeviceComm from device buffers, or handed over in memory
// between two chunks of this rank (DualPipeV's turn).
#include <map>
#include <memory>
#include <vector>

#include "comm/device_comm.hpp"
#include "ops/backend/device_timer.hpp"
#include "pipeline/schedule.hpp"
#include "train/transfer_buffers.hpp"

namespace mt {

// A payload in a transfer buffer, valid once `ready` is reached (on the stream that wrote it).
struct Parcel {
  Buffer data;
  Mark ready;
};

class StepMailbox {
 public:
  StepMailbox(const pipeline::Placement& placement, int me, DeviceComm& pp, TransferBuffers& buffers)
      : pl_(placement), me_(me), pp_(pp), buffers_(buffers), wait_time_(buffers.backend()) {}

  // One of the schedule's communication operations.
  void communicate(const pipeline::CommOp& op);
  // Hands what a task produced on `stream` (`data`, in device memory) to the position that needs
  // it: a copy in a transfer buffer, kept on this rank or put out for the schedule's send.
  void deliver(const pipeline::Transfer& t, const Backend& stream, const float* data);
  // The input of a task on `stream`: the stream waits until it is there.
  Parcel take(const pipeline::Transfer& t, const Backend& stream);
  // A parcel's buffer may carry the next payload once `last_user`'s queued ops are through.
  void release(Parcel& parcel, const Backend& last_user);
  // The end of the step: waits for the sends; throws when a transfer was left over.
  void finish();
  // Seconds waiting for transfers since the last call.
  double take_wait_seconds() { return wait_time_.take_seconds(); }

 private:
  using Key = pipeline::TransferKey;
  struct InFlight {
    Parcel parcel;
    std::unique_ptr<Request> request;
  };
  // The device's first stream: the pipeline group's transfers queue there.
  const Backend& main() const { return buffers_.backend(); }

  const pipeline::Placement& pl_;
  int me_;
  DeviceComm& pp_;
  TransferBuffers& buffers_;
  DeviceTimer wait_time_;  // on the first stream
  std::map<Key, Parcel> mailbox_, outbox_;
  std::map<Key, InFlight> receiving_;
  std::vector<InFlight> sends_;
};

}  // namespace mt
