#include "train/transfer_buffers.hpp"

#include <algorithm>

namespace mt {

void TransferBuffers::settle() {
  std::sort(spare_.begin(), spare_.end(),
            [](const Spare& a, const Spare& b) { return a.buffer.raw() < b.buffer.raw(); });
}

Buffer TransferBuffers::take(const Backend& writer) {
  if (spare_.empty()) {
    Buffer fresh(backend_, DType::f32, floats_);
    order_after(writer, backend_);  // its zero-fill
    return fresh;
  }
  Spare s = std::move(spare_.back());
  spare_.pop_back();
  s.released.make_wait(writer);
  return std::move(s.buffer);
}

}  // namespace mt
