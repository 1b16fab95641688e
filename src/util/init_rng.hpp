#pragma once
// Counter-based random numbers for initialisation: the value of element i of parameter `name`
// depends only on (seed, name, i). Any layout that owns a slice of a parameter draws the same
// numbers for it, which is what makes runs on different rank grids start from the same model.
#include <algorithm>
#include <cmath>
#include <cstddef>
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

// float(scale * counter_normal(key, first + k)) for k < n: the same operations on the same
// numbers, in loops of their own around the log and cos calls, so that the arithmetic between
// the calls stays in registers (a tenth faster than counter_normal element by element).
inline void counter_normals(uint64_t key, uint64_t first, size_t n, double scale, float* out) {
  constexpr size_t batch = 256;
  double u1[batch], u2[batch];
  for (size_t at = 0; at < n; at += batch) {
    const size_t m = std::min(batch, n - at);
    for (size_t k = 0; k < m; ++k) {
      u1[k] = counter_uniform(key, 2 * (first + at + k));
      u2[k] = counter_uniform(key, 2 * (first + at + k) + 1);
    }
    for (size_t k = 0; k < m; ++k) u1[k] = std::log(u1[k]);
    for (size_t k = 0; k < m; ++k) u2[k] = std::cos(6.283185307179586 * u2[k]);
    for (size_t k = 0; k < m; ++k) out[at + k] = float(scale * (std::sqrt(-2.0 * u1[k]) * u2[k]));
  }
}

inline uint64_t param_key(uint64_t seed, std::string_view name) {
  return splitmix64(seed) ^ name_hash(name);
}

}  // namespace mt
