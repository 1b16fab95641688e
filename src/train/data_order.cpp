#include "train/data_order.hpp"

#include "util/error.hpp"
#include "util/init_rng.hpp"

namespace mt {

namespace {

// Distinct from the streams the weights draw from the same seed.
constexpr uint64_t kDataStream = 0x64617461206F7264ull;

}  // namespace

WindowOrder::WindowOrder(long long windows, bool shuffle, uint64_t seed)
    : windows_(windows), shuffle_(shuffle), key_(splitmix64(splitmix64(seed) ^ kDataStream)) {
  if (windows < 1) throw std::logic_error("WindowOrder: no windows");
  while (half_bits_ < 31 && (uint64_t(1) << (2 * half_bits_)) < uint64_t(windows)) ++half_bits_;
}

uint64_t WindowOrder::permute(uint64_t epoch_key, uint64_t x) const {
  const uint64_t mask = (uint64_t(1) << half_bits_) - 1;
  uint64_t left = x >> half_bits_, right = x & mask;
  for (int r = 0; r < kRounds; ++r) {
    const uint64_t mixed = left ^ (splitmix64(right ^ splitmix64(epoch_key + uint64_t(r))) & mask);
    left = right;
    right = mixed;
  }
  return (left << half_bits_) | right;
}

long long WindowOrder::window(long long sequence) const {
  const long long epoch = sequence / windows_, position = sequence % windows_;
  if (!shuffle_) return position;
  const uint64_t epoch_key = splitmix64(key_ ^ splitmix64(uint64_t(epoch)));
  // A bijection of [0, 4^half_bits) walked until it lands in [0, W) is a bijection of [0, W);
  // the domain is under 4 W, so a few steps on average.
  uint64_t x = permute(epoch_key, uint64_t(position));
  while (x >= uint64_t(windows_)) x = permute(epoch_key, x);
  return (long long)x;
}

}  // namespace mt
