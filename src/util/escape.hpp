#pragma once
// Text encodings for `inspect --json` and `--csv`: JSON strings and numbers, CSV fields (RFC 4180),
// and the shortest decimal text that reads back as the same double.
#include <string>
#include <string_view>

namespace mt {

std::string shortest_number(double x);         // 0.003, 2.3120000000000001 -> "2.312"; "nan", "inf"
std::string json_string(std::string_view s);   // quoted; ", \ and control characters escaped
std::string json_number(double x);             // shortest_number, or null for NaN and infinities
std::string csv_field(std::string_view s);     // quoted (with "" for ") when it holds , " CR LF or edge spaces

}  // namespace mt
