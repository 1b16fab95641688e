#pragma once
// A whole file as text (bytes as they are).
#include <fstream>
#include <sstream>
#include <string>

#include "util/error.hpp"

namespace mt {

// Throws UserError("<path>: <cannot_open>") when the file cannot be opened.
inline std::string read_file(const std::string& path, const std::string& cannot_open = "cannot read") {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": " + cannot_open);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace mt
