#include "config/stored_config.hpp"

#include <sstream>

#include <toml++/toml.h>

#include "config/config.hpp"

namespace mt {

std::string upgrade_stored_config(const std::string& toml_text) {
  toml::table root;
  try {
    root = toml::parse(std::string_view{toml_text});
  } catch (const toml::parse_error&) {
    return toml_text;
  }
  bool changed = false;
  if (toml::table* training = root["training"].as_table(); training && training->contains("eval_batches")) {
    const int64_t batches = (*training)["eval_batches"].value_or(int64_t(0));
    const int64_t micro = (*training)["micro_batch"].value_or(int64_t(TrainingConfig{}.micro_batch));
    training->erase("eval_batches");
    if (!training->contains("eval_sequences")) training->insert("eval_sequences", batches * micro);
    changed = true;
  }
  if (toml::table* data = root["data"].as_table(); data && !data->contains("shuffle")) {
    data->insert("shuffle", false);
    changed = true;
  }
  if (!changed) return toml_text;
  std::ostringstream s;
  s << root << "\n";
  return s.str();
}

}  // namespace mt
