#include "inspect/flat_config.hpp"

#include <sstream>

#include <toml++/toml.h>

#include "config/stored_config.hpp"
#include "util/escape.hpp"
#include "util/error.hpp"

namespace mt {

namespace {

ConfigValue value_of(const toml::node& node) {
  ConfigValue v;
  if (auto s = node.value_exact<std::string>()) {
    v.kind = ConfigValue::Kind::string;
    v.text = *s;
  } else if (auto i = node.value_exact<int64_t>()) {
    v.kind = ConfigValue::Kind::integer;
    v.number = double(*i);
    v.text = std::to_string(*i);
  } else if (auto d = node.value_exact<double>()) {
    v.kind = ConfigValue::Kind::floating;
    v.number = *d;
    v.text = shortest_number(*d);
  } else if (auto b = node.value_exact<bool>()) {
    v.kind = ConfigValue::Kind::boolean;
    v.text = *b ? "true" : "false";
  } else {
    std::ostringstream s;
    node.visit([&](auto&& n) { s << n; });
    v.text = s.str();
  }
  return v;
}

void flatten(const toml::table& t, const std::string& prefix, FlatConfig& out) {
  for (auto&& [k, node] : t) {
    const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (node.is_table()) flatten(*node.as_table(), key, out);
    else out[key] = value_of(node);
  }
}

bool same(const ConfigValue& a, const ConfigValue& b) { return a.kind == b.kind && a.text == b.text; }

}  // namespace

FlatConfig flatten_config(const std::string& toml_text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(std::string_view{upgrade_stored_config(toml_text)}, std::string_view{source});
  } catch (const toml::parse_error& e) {
    throw UserError(source + ": the stored config is not valid TOML (line " + std::to_string(e.source().begin.line) +
                    ": " + std::string(e.description()) + "); it should be the resolved config moetrain wrote");
  }
  FlatConfig out;
  flatten(root, "", out);
  return out;
}

std::vector<std::string> differing_keys(const std::vector<const FlatConfig*>& configs,
                                        const std::set<std::string>& ignore) {
  std::set<std::string> keys;
  for (const FlatConfig* c : configs)
    for (const auto& [key, value] : *c) keys.insert(key);
  std::vector<std::string> out;
  for (const std::string& key : keys) {
    if (ignore.count(key)) continue;
    const auto first = configs.front()->find(key);
    for (const FlatConfig* c : configs) {
      const auto it = c->find(key);
      const bool both_missing = it == c->end() && first == configs.front()->end();
      const bool both_same = it != c->end() && first != configs.front()->end() && same(it->second, first->second);
      if (!both_missing && !both_same) {
        out.push_back(key);
        break;
      }
    }
  }
  return out;
}

long long config_int(const FlatConfig& c, const std::string& key, long long fallback) {
  const auto it = c.find(key);
  return it != c.end() && it->second.kind == ConfigValue::Kind::integer ? std::stoll(it->second.text) : fallback;
}

double config_number(const FlatConfig& c, const std::string& key, double fallback) {
  const auto it = c.find(key);
  if (it == c.end()) return fallback;
  const auto k = it->second.kind;
  return k == ConfigValue::Kind::integer || k == ConfigValue::Kind::floating ? it->second.number : fallback;
}

std::string config_text(const FlatConfig& c, const std::string& key, const std::string& fallback) {
  const auto it = c.find(key);
  return it == c.end() ? fallback : it->second.text;
}

}  // namespace mt
