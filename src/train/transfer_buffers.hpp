#pragma once
// Device buffers of the pipeline's transfers (a micro-batch's activations or their gradient),
// kept from step to step: a GPU allocation synchronizes the device, so a step allocates only when
// it has more transfers in flight than any step before.
#include <vector>

#include "ops/backend/mark.hpp"
#include "tensor/buffer.hpp"

namespace mt {

// `backend` is the device's first stream, on which the pipeline group communicates; the chunks'
// streams write and read the buffers too, so each spare buffer keeps the mark after its last use.
class TransferBuffers {
 public:
  TransferBuffers(const Backend& backend, size_t floats) : backend_(backend), floats_(floats) {}
  // A buffer for `writer` to fill: writer's stream first waits for the buffer's last use.
  Buffer take(const Backend& writer);
  // Back to the spares once the ops queued on `last_user` so far are done with it.
  void give(Buffer b, const Backend& last_user) { spare_.push_back({std::move(b), Mark::recorded(last_user)}); }
  // Puts the spares in address order, so that every step takes the same buffers in the same order
  // (a step's takes and gives leave them permuted): what replaying a captured step needs.
  void settle();
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

}  // namespace mt
