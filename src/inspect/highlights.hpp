#pragma once
// The settings a reader of a run or checkpoint wants first, as labelled lines of text, from the
// resolved config: model shape, batch and steps, optimizer, precision, load balancing.
#include <string>
#include <utility>
#include <vector>

#include "inspect/flat_config.hpp"

namespace mt {

// {label, text} lines: model, training, optimizer, precision, balance.
std::vector<std::pair<std::string, std::string>> config_highlights(const FlatConfig& c);

}  // namespace mt
