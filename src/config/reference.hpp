#pragma once
#include <string>

namespace mt {
// Every config key as a Markdown table: key, type, valid values, default, meaning. This is the
// config reference in docs/config.md (`moetrain keys` prints it).
std::string config_reference_markdown();
}  // namespace mt
