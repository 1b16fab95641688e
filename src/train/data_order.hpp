#pragma once
// The order in which a run reads the training windows. Sequence i of the run falls in epoch
// e = i / W at position p = i % W (W windows); in file order it reads window p, shuffled it reads
// window perm_{seed,e}(p), a fresh permutation of [0, W) each epoch. The permutation is a keyed
// bijection computed per position (a Feistel network on the next even power of two, walked back
// into [0, W)), so no table of W entries is held and every layout finds any sequence's window
// on its own.
#include <cstdint>

namespace mt {

class WindowOrder {
 public:
  WindowOrder(long long windows, bool shuffle, uint64_t seed);
  long long window(long long sequence) const;
  long long windows() const { return windows_; }

 private:
  static constexpr int kRounds = 4;
  uint64_t permute(uint64_t epoch_key, uint64_t position) const;

  long long windows_;
  bool shuffle_;
  uint64_t key_;       // from the seed; each epoch's round keys derive from it
  int half_bits_ = 1;  // the Feistel network works on 2 * half_bits_ bits
};

}  // namespace mt
