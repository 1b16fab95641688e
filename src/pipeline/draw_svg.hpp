#pragma once
// Draws a simulated timeline as SVG: one row per rank, one box per operation, time to the right,
// colour by pass (F, B, I, W) and shade by chunk; an F&B pair is a box split into its forward
// (top) and backward (bottom) halves. Boxes carry the micro-batch number.
#include <string>

#include "pipeline/simulate.hpp"

namespace mt::pipeline {

std::string timeline_svg(const Schedule& s, const Timeline& tl, const std::string& title);

}  // namespace mt::pipeline
