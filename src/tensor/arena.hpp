#pragma once
// A bump allocator for one micro-batch's activations. Everything a forward pass saves and
// everything its backward pass produces lives here until the micro-batch is retired, so layers
// can keep plain pointers to their inputs. The first step grows the arena as needed; reset()
// then coalesces it into one block of the high-water size, so later steps allocate nothing.
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <vector>

namespace mt {

class Arena {
 public:
  float* floats(size_t n) { return static_cast<float*>(bytes(n * sizeof(float))); }
  int* ints(size_t n) { return static_cast<int*>(bytes(n * sizeof(int))); }
  void* bytes(size_t n);
  // Zero-filled variant for accumulators.
  float* zeros(size_t n);
  void reset();
  size_t capacity() const;
  size_t high_water() const { return high_water_; }

 private:
  struct Free { void operator()(std::byte* p) const { std::free(p); } };
  struct Block { std::unique_ptr<std::byte[], Free> data; size_t size = 0, used = 0; };
  static Block make_block(size_t size);
  std::vector<Block> blocks_;
  size_t in_use_ = 0, high_water_ = 0;
};

}  // namespace mt
