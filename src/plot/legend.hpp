#pragma once
// Legends: a column of swatches (a line, a dot or a filled box) with their labels.
#include <string>
#include <vector>

#include "util/svg.hpp"

namespace mt::plot {

struct LegendEntry {
  enum class Swatch { line, dot, box };
  std::string label;
  svg::Rgb colour;
  Swatch swatch = Swatch::line;
};

constexpr double kLegendRow = 18;

// Width the column needs: the swatch and the longest label at 12 px sans-serif.
double legend_width(const std::vector<LegendEntry>& entries);
// Draws the column from (x, y) down, kLegendRow per entry.
std::string draw_legend(const std::vector<LegendEntry>& entries, double x, double y);

}  // namespace mt::plot
