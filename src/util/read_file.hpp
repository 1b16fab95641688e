#pragma once
// A whole file as text (bytes as they are).
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "util/error.hpp"

namespace mt {

// Throws UserError("<path>: <cannot_open>") when the file cannot be opened. A directory opens as
// an empty stream on Linux, so it is refused by name rather than read as an empty file.
inline std::string read_file(const std::string& path, const std::string& cannot_open = "cannot read") {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw UserError(path + ": is a directory, not a file: " + cannot_open);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": " + cannot_open);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace mt
