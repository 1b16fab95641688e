#pragma once
// `inspect` as plain text: one run, or one checkpoint, as aligned "label  text" lines.
#include <string>

#include "inspect/checkpoint_summary.hpp"
#include "inspect/run_summary.hpp"

namespace mt {

std::string run_text(const RunSummary& s);
std::string checkpoint_text(const CheckpointSummary& s);

}  // namespace mt
