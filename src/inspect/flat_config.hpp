#pragma once
// A resolved config (TOML text, as log.h5 and checkpoints store it) as dotted keys, for showing a
// run's settings and for finding the keys in which runs differ.
#include <map>
#include <set>
#include <string>
#include <vector>

namespace mt {

struct ConfigValue {
  enum class Kind { string, integer, floating, boolean, other };
  Kind kind = Kind::other;
  std::string text;   // strings without quotes, numbers in their shortest form, true/false, arrays as TOML
  double number = 0;  // integer and floating values
};

using FlatConfig = std::map<std::string, ConfigValue>;  // "optimizer.lr" -> 0.003

// UserError naming `source` (where the text came from) when it is not TOML.
FlatConfig flatten_config(const std::string& toml_text, const std::string& source);

// Keys whose values are not the same in every config (a key some configs lack counts as
// different), in key order, leaving out `ignore`.
std::vector<std::string> differing_keys(const std::vector<const FlatConfig*>& configs,
                                        const std::set<std::string>& ignore);

// Typed look-ups with a fallback for keys the config lacks (a log of an older moetrain).
long long config_int(const FlatConfig& c, const std::string& key, long long fallback);
double config_number(const FlatConfig& c, const std::string& key, double fallback);
std::string config_text(const FlatConfig& c, const std::string& key, const std::string& fallback);

}  // namespace mt
