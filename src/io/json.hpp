#pragma once
// A JSON reader for the two JSON files moetrain reads: a Hugging Face config.json and a
// safetensors header. Numbers are doubles; objects keep their keys sorted. Writing JSON needs no
// reader: util/escape.hpp quotes strings.
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mt {

struct Json {
  enum class Kind { null, boolean, number, string, array, object } kind = Kind::null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::map<std::string, Json> object;

  bool has(const std::string& key) const { return kind == Kind::object && object.count(key) > 0; }
  // object[key]; throws UserError naming `where` and the key when it is missing.
  const Json& at(const std::string& key, const std::string& where) const;
};

// Throws UserError("<where>: byte N: <what is wrong>") on malformed text.
Json parse_json(std::string_view text, const std::string& where);

}  // namespace mt
