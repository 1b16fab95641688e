#pragma once
// The bubble formulas published for each schedule, to print beside the simulated bubble.
// Sources: DeepSeek-V3 report Table 2 and the DualPipe README (1F1B, ZB1P, DualPipe, DualPipeV);
// Narayanan et al. 2021 §2.2 (GPipe, interleaved).
#include <string>

#include "pipeline/schedule.hpp"
#include "pipeline/simulate.hpp"

namespace mt::pipeline {

struct PublishedBubble {
  std::string formula;  // in the source's notation
  double value;         // per rank, in the costs' unit
};

PublishedBubble published_bubble(Kind kind, int pp, const Costs& c);

}  // namespace mt::pipeline
