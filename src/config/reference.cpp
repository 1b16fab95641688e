#include "config/reference.hpp"

#include <sstream>

#include "config/schema.hpp"

namespace mt {

namespace {
std::string escape_pipes(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}
}  // namespace

std::string config_reference_markdown() {
  Config defaults;
  std::ostringstream out;
  out << "| key | type | valid | default | meaning |\n|---|---|---|---|---|\n";
  for (auto& f : schema_fields(defaults)) {
    toml::table one;
    f.write(one, "v");
    std::ostringstream value;
    value << one;
    out << "| `" << f.key << "` | " << f.type << " | " << escape_pipes(f.valid) << " | `"
        << value.str().substr(4) << "` | " << escape_pipes(f.doc) << " |\n";
  }
  return out.str();
}

}  // namespace mt
