#pragma once
// A bump allocator of device memory for one micro-batch's activations. Everything a forward pass
// saves and everything its backward pass produces lives here until the micro-batch is retired,
// so layers can keep plain (device) pointers to their inputs. The first step grows the arena by
// doubling; reset() then coalesces it into one block of the high-water size, so later steps
// allocate nothing when they need the same. The sizes a step asks for are fixed for the run (the
// rows an expert-parallel rank receives take a bound, not the routing's count); should a need still
// grow, a micro-batch after the first step (settle()) that needs more than any before adds a block
// of an eighth of the arena, and reset() coalesces with an eighth to spare: a need that keeps
// creeping up reallocates a few times, not every step (and the step counters show it).
#include <cstddef>
#include <vector>

#include "tensor/buffer.hpp"

namespace mt {

class Arena {
 public:
  explicit Arena(const Backend& backend) : backend_(backend) {}
  float* floats(size_t n) { return static_cast<float*>(bytes(n * sizeof(float))); }
  double* doubles(size_t n) { return static_cast<double*>(bytes(n * sizeof(double))); }
  int* ints(size_t n) { return static_cast<int*>(bytes(n * sizeof(int))); }
  Bf16* bf16s(size_t n) { return static_cast<Bf16*>(bytes(n * sizeof(Bf16))); }
  void* bytes(size_t n);
  // Zero-filled variant for accumulators.
  float* zeros(size_t n);
  void reset();
  // The first training step is over: it showed what a micro-batch needs when the need is fixed,
  // so growth from now on means a need that varies (see above).
  void settle() { settled_ = true; }
  size_t capacity() const;
  size_t high_water() const { return high_water_; }
  const Backend& backend() const { return backend_; }

 private:
  struct Block { Buffer data; size_t size = 0, used = 0; };
  Block make_block(size_t size) const;
  Backend backend_;
  std::vector<Block> blocks_;
  size_t in_use_ = 0, high_water_ = 0;
  bool settled_ = false;  // settle() was called
};

}  // namespace mt
