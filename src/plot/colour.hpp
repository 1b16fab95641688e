#pragma once
// Colours of the charts: one per run or line (categorical, distinguishable side by side) and the
// diverging map of the expert-load heatmap (blue below balance, white at it, red above).
#include <cstddef>

#include "util/svg.hpp"

namespace mt::plot {

svg::Rgb category_colour(size_t i);  // cycles after ten
// t in [-1, 1] (clamped): -1 dark blue, 0 near white, 1 dark red.
svg::Rgb diverging(double t);
// Where an expert's load fraction falls on the diverging map: log2 of its ratio to the balanced
// share 1/experts, over +-2 (a quarter to four times the balanced load).
double load_position(double load, int experts);

}  // namespace mt::plot
