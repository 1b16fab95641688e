#pragma once
// printf-style formatting of one number into a std::string, for tables and drawings.
#include <cstdio>
#include <string>

namespace mt {

inline std::string format_number(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace mt
