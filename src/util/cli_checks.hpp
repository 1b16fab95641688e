#pragma once
// Command-line option checks that read the text themselves, so that a value is either used as
// written or refused with its limit: CLI11's own range check prints DBL_MAX in full, and its
// conversion clamps or wraps (--seed -1) what does not fit the option's type.
#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace mt {

// A whole number in [lo, hi], e.g. "--tokens: 0 is out of range (at least 1)".
inline CLI::Validator whole_in(long long lo, long long hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        long long v = 0;
        const char* end = text.data() + text.size();
        const auto [at, ec] = std::from_chars(text.data(), end, v);
        const bool digits = at == end && !text.empty();
        if (ec == std::errc::result_out_of_range || (digits && v > hi))
          return text + " is out of range (" + (text[0] == '-' ? "at least " + std::to_string(lo)
                                                               : "at most " + std::to_string(hi)) + ")";
        if (ec != std::errc() || !digits) return "'" + text + "' is not a whole number in " + range;
        if (v < lo) return text + " is out of range (at least " + std::to_string(lo) + ")";
        return "";
      },
      "INT in " + range);
}

// A whole number that fits 64 unsigned bits (a seed): no sign, no wrap-around.
inline CLI::Validator unsigned_64() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t v = 0;
        const char* end = text.data() + text.size();
        const auto [at, ec] = std::from_chars(text.data(), end, v);
        if (ec == std::errc::result_out_of_range)
          return text + " is out of range (at most " + std::to_string(UINT64_MAX) + ")";
        if (ec != std::errc() || at != end || text.empty())
          return "'" + text + "' is not a whole number in [0, " + std::to_string(UINT64_MAX) + "]";
        return "";
      },
      "UINT64");
}

// A finite number >= lo (NaN and infinities refused).
inline CLI::Validator finite_at_least(double lo) {
  const std::string what = "a finite number >= " + CLI::detail::to_string(lo);
  return CLI::Validator(
      [lo, what](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < lo)
          return "'" + text + "' is not " + what;
        return "";
      },
      "FLOAT >= " + CLI::detail::to_string(lo));
}

// Any text but an empty one, which the option would otherwise read as not given.
inline CLI::Validator not_empty(const std::string& expected) {
  return CLI::Validator(
      [expected](std::string& text) -> std::string { return text.empty() ? "empty; expected " + expected : ""; },
      "TEXT");
}

}  // namespace mt
