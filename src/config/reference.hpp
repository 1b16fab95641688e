#pragma once
#include <string>

namespace mt {
// Every config key as a Markdown table: key, type, valid values, default, meaning. This is the
// README's config reference (`moetrain keys` prints it).
std::string config_reference_markdown();
}  // namespace mt
