#pragma once
// The config schema: one Field per TOML key, bound to a member of a Config. A field knows its
// type, its valid values (for error messages and the reference in docs/config.md), how to read itself from
// a TOML node and how to write its value back.
#include <functional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "config/config.hpp"

namespace mt {

struct Field {
  std::string key;    // dotted, e.g. "model.moe.top_k"
  std::string type;   // "integer", "float", "string", "one of ..."
  std::string valid;  // e.g. ">= 1", "(0, 1)", "cosine | constant"
  std::string doc;
  // Reads and range-checks the node; returns an empty string on success, else the complaint
  // ("must be an integer, got a string").
  std::function<std::string(const toml::node&)> read;
  std::function<void(toml::table&, const std::string& leaf)> write;
};

std::vector<Field> schema_fields(Config& cfg);

}  // namespace mt
