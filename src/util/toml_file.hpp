#pragma once
// TOML files the planner reads (cluster profiles, the published-runs file): parse errors and
// positions that name the file, the line and the column.
#include <toml++/toml.h>

#include <filesystem>
#include <string>

#include "util/error.hpp"

namespace mt {

// "path:line:column" of a node, for messages.
inline std::string toml_position(const std::string& path, const toml::node& n) {
  const auto& s = n.source();
  return path + ":" + std::to_string(s.begin.line) + ":" + std::to_string(s.begin.column);
}

// The whole file; `what` names it in the error when it cannot be opened ("the cluster profile").
inline toml::table parse_toml_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UserError(path + ": is a directory, not " + what + ": name the TOML file itself");
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& s = e.source();
    if (!s.begin) throw UserError(path + ": cannot open " + what + ": check the path");
    throw UserError(path + ":" + std::to_string(s.begin.line) + ":" + std::to_string(s.begin.column) + ": " +
                    std::string(e.description()));
  }
}

}  // namespace mt
