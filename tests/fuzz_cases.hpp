#pragma once
// How many cases a fuzzer runs: all of them in the normal build, a fifth under AddressSanitizer
// (`make asan`), where each takes about ten times as long, so that build's run stays within a minute.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kFuzzShare = 5;
#else
constexpr int kFuzzShare = 1;
#endif

constexpr int fuzz_cases(int cases) { return cases / kFuzzShare; }
