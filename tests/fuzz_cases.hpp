#pragma once
#include <cstddef>
#include <random>
#include <string>

// How many cases a fuzzer runs: all of them in the normal build, a fifth under AddressSanitizer
// (`make asan`), where each takes about ten times as long, so that build's run stays within a minute.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kFuzzShare = 5;
#else
constexpr int kFuzzShare = 1;
#endif

constexpr int fuzz_cases(int cases) { return cases / kFuzzShare; }

using Rng = std::mt19937_64;

// A number in [0, n), 0 for n = 0.
inline size_t below(Rng& rng, size_t n) { return n == 0 ? 0 : size_t(rng() % n); }

// The byte-level mutations every text fuzzer shares, chosen by `kind`: 0 flips a byte, 1 truncates,
// 2 inserts one of `significant` (characters the format gives meaning to), 3 deletes a short range.
inline void mutate_bytes(std::string& text, Rng& rng, int kind, const std::string& significant) {
  switch (kind) {
    case 0:
      if (!text.empty()) text[below(rng, text.size())] = char(rng());
      break;
    case 1:
      text.resize(below(rng, text.size() + 1));
      break;
    case 2:
      text.insert(below(rng, text.size() + 1), 1, significant[below(rng, significant.size())]);
      break;
    default: {
      const size_t at = below(rng, text.size() + 1);
      text.erase(at, below(rng, 8) + 1);
    }
  }
}
