#pragma once
// Counter-based random numbers for initialisation: the value of element i of parameter `name`
// depends only on (seed, name, i). Any layout that owns a slice of a parameter draws the same
// numbers for it, which is what makes runs on different rank grids start from the same model.
#include <cmath>
#include <cstdint>
#include <string_view>

namespace mt {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t name_hash(std::string_view name) {  // FNV-1a, 64 bit
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) { h ^= c; h *= 0x100000001b3ull; }
  return h;
}

// Uniform in (0, 1): 53 random bits, never exactly 0 so log() is safe.
inline double counter_uniform(uint64_t key, uint64_t counter) {
  uint64_t bits = splitmix64(key ^ splitmix64(counter));
  return (double(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Standard normal for element `index` of the stream `key` (Box-Muller on two counters).
inline double counter_normal(uint64_t key, uint64_t index) {
  double u1 = counter_uniform(key, 2 * index), u2 = counter_uniform(key, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

inline uint64_t param_key(uint64_t seed, std::string_view name) {
  return splitmix64(seed) ^ name_hash(name);
}

}  // namespace mt
