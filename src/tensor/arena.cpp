#include "tensor/arena.hpp"

#include <algorithm>
#include <cstddef>

namespace mt {

static constexpr size_t kAlign = 64;

Arena::Block Arena::make_block(size_t size) const {
  // Backends align allocations to at least 16 bytes; blocks are whole numbers of kAlign. Left
  // unfilled (every caller writes what it takes, and zeros() fills): on the CPU a page becomes
  // resident when first written, so the first step's blocks doubling past the need cost no memory.
  return Block{Buffer(backend_, DType::f32, size / sizeof(float), Unfilled{}), size, 0};
}

void* Arena::bytes(size_t n) {
  n = (n + kAlign - 1) / kAlign * kAlign;
  if (blocks_.empty() || blocks_.back().used + n > blocks_.back().size) {
    const size_t grow = blocks_.empty() ? size_t(1) << 20 : settled_ ? capacity() / 8 : blocks_.back().size * 2;
    blocks_.push_back(make_block(std::max(n, grow)));
  }
  Block& b = blocks_.back();
  void* p = reinterpret_cast<std::byte*>(b.data.f32()) + b.used;
  b.used += n;
  in_use_ += n;
  if (in_use_ > high_water_) high_water_ = in_use_;
  return p;
}

float* Arena::zeros(size_t n) {
  float* p = floats(n);
  backend_.zero(p, n * sizeof(float));
  return p;
}

void Arena::reset() {
  if (blocks_.size() > 1) {  // coalesce so the next use of this size fits one block
    const size_t size = settled_ ? high_water_ + high_water_ / 8 : high_water_;
    blocks_.clear();
    blocks_.push_back(make_block((size + kAlign - 1) / kAlign * kAlign));
  }
  for (auto& b : blocks_) b.used = 0;
  in_use_ = 0;
}

size_t Arena::capacity() const {
  size_t c = 0;
  for (auto& b : blocks_) c += b.size;
  return c;
}

}  // namespace mt
