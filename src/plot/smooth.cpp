#include "plot/smooth.hpp"

#include <algorithm>
#include <cmath>

namespace mt::plot {

std::vector<double> smooth(const std::vector<double>& y, size_t half) {
  // Prefix sums of the finite values and of their count make each window O(1).
  std::vector<double> sum(y.size() + 1, 0.0), count(y.size() + 1, 0.0);
  for (size_t i = 0; i < y.size(); ++i) {
    const bool ok = std::isfinite(y[i]);
    sum[i + 1] = sum[i] + (ok ? y[i] : 0.0);
    count[i + 1] = count[i] + (ok ? 1 : 0);
  }
  std::vector<double> out(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    const size_t a = i >= half ? i - half : 0, b = std::min(y.size(), i + half + 1);
    out[i] = std::isfinite(y[i]) ? (sum[b] - sum[a]) / (count[b] - count[a]) : y[i];
  }
  return out;
}

size_t smoothing_half_width(size_t n) { return n / 50; }

}  // namespace mt::plot
