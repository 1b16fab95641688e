#include "plot/legend.hpp"

#include <algorithm>

namespace mt::plot {

namespace {
constexpr double kSwatch = 20, kGap = 6, kCharWidth = 7;  // 12 px sans-serif averages under 7 px a character
}

double legend_width(const std::vector<LegendEntry>& entries) {
  size_t longest = 0;
  for (const auto& e : entries) longest = std::max(longest, e.label.size());
  return kSwatch + kGap + kCharWidth * longest;
}

std::string draw_legend(const std::vector<LegendEntry>& entries, double x, double y) {
  std::string out;
  for (const auto& e : entries) {
    const double mid = y + kLegendRow / 2;
    const std::string c = svg::hex(e.colour);
    switch (e.swatch) {
      case LegendEntry::Swatch::line: out += svg::line(x, mid, x + kSwatch, mid, c, 3); break;
      case LegendEntry::Swatch::dot: out += svg::circle(x + kSwatch / 2, mid, 4, c, " stroke=\"white\""); break;
      case LegendEntry::Swatch::box:
        out += svg::rect(x + 3, mid - 6, kSwatch - 6, 12, c, " stroke=\"#555\" stroke-width=\"0.5\"");
        break;
    }
    out += svg::text(x + kSwatch + kGap, mid, 12, e.label, "start", " fill=\"#222\"");
    y += kLegendRow;
  }
  return out;
}

}  // namespace mt::plot
