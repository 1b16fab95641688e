#include "plot/colour.hpp"

#include <algorithm>
#include <cmath>

namespace mt::plot {

svg::Rgb category_colour(size_t i) {
  // Tableau 10: distinct hues of similar weight.
  static const svg::Rgb palette[] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},  {148, 103, 189},
                                     {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};
  return palette[i % 10];
}

svg::Rgb diverging(double t) {
  // ColorBrewer RdBu, five anchors.
  static const svg::Rgb anchors[] = {{33, 102, 172}, {146, 197, 222}, {247, 247, 247}, {244, 165, 130}, {178, 24, 43}};
  if (std::isnan(t)) return {200, 200, 200};
  const double u = (std::clamp(t, -1.0, 1.0) + 1) * 2;  // 0..4
  const int i = std::min(3, int(u));
  const double f = u - i;
  auto mix = [&](int a, int b) { return int(std::lround(a + (b - a) * f)); };
  const svg::Rgb a = anchors[i], b = anchors[i + 1];
  return {mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b)};
}

double load_position(double load, int experts) {
  if (!(load > 0)) return -1;
  return std::clamp(std::log2(load * experts) / 2, -1.0, 1.0);
}

}  // namespace mt::plot
