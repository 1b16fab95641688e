#include "plot/smooth.hpp"

#include <cmath>

namespace mt::plot {

std::vector<double> smooth(const std::vector<double>& x, const std::vector<double>& y, long long window) {
  if (window <= 1) return y;
  // Prefix sums of the finite values and of their count make each window O(1).
  std::vector<double> sum(y.size() + 1, 0.0), count(y.size() + 1, 0.0);
  for (size_t i = 0; i < y.size(); ++i) {
    const bool ok = std::isfinite(y[i]);
    sum[i + 1] = sum[i] + (ok ? y[i] : 0.0);
    count[i + 1] = count[i] + (ok ? 1 : 0);
  }
  std::vector<double> out(y.size());
  size_t first = 0;  // the first point inside the window of point i
  for (size_t i = 0; i < y.size(); ++i) {
    while (x[first] <= x[i] - double(window)) ++first;
    out[i] = std::isfinite(y[i]) ? (sum[i + 1] - sum[first]) / (count[i + 1] - count[first]) : y[i];
  }
  return out;
}

long long default_smoothing_window(long long steps) { return steps >= 50 ? steps / 25 : 0; }

}  // namespace mt::plot
