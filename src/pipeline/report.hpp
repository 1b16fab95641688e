#pragma once
// What `moetrain schedule` prints: a text summary with the per-rank order, or JSON for scripts.
#include <string>

#include "pipeline/simulate.hpp"

namespace mt::pipeline {

std::string schedule_text(const Schedule& s, const Timeline& tl, const Costs& costs);
std::string schedule_json(const Schedule& s, const Timeline& tl, const Costs& costs);

}  // namespace mt::pipeline
