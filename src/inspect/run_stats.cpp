#include "inspect/run_stats.hpp"

#include <algorithm>
#include <cmath>

namespace mt {

double tail_mean(const std::vector<double>& v, size_t window) {
  const size_t n = std::min(window, v.size());
  if (n == 0) return NAN;
  double sum = 0;
  for (size_t i = v.size() - n; i < v.size(); ++i) sum += v[i];
  return sum / double(n);
}

WindowMean best_window_mean(const std::vector<double>& v, size_t window) {
  const size_t n = std::min(window, v.size());
  if (n == 0) return {NAN, 0};
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += v[i];
  WindowMean best{sum / double(n), n - 1};
  for (size_t i = n; i < v.size(); ++i) {
    sum += v[i] - v[i - n];
    if (sum / double(n) < best.mean) best = {sum / double(n), i};
  }
  return best;
}

double median_after_first(const std::vector<double>& v) {
  std::vector<double> kept;
  for (size_t i = v.size() > 1 ? 1 : 0; i < v.size(); ++i)
    if (!std::isnan(v[i])) kept.push_back(v[i]);
  if (kept.empty()) return NAN;
  std::sort(kept.begin(), kept.end());
  const size_t mid = kept.size() / 2;
  return kept.size() % 2 ? kept[mid] : 0.5 * (kept[mid - 1] + kept[mid]);
}

std::vector<Imbalance> expert_imbalance(const std::vector<float>& load, size_t steps, int layers, int experts) {
  std::vector<Imbalance> out;
  if (steps == 0 || layers <= 0 || experts <= 0) return out;
  const size_t share = std::max<size_t>(1, (steps + 9) / 10);
  auto at_step = [&](size_t s, int layer) {
    const float* l = &load[(s * layers + layer) * experts];
    double sum = 0, most = 0;
    for (int e = 0; e < experts; ++e) sum += l[e], most = std::max(most, double(l[e]));
    return sum > 0 ? most / (sum / experts) : NAN;
  };
  auto average = [&](size_t begin, int layer) {
    double sum = 0;
    for (size_t s = begin; s < begin + share; ++s) sum += at_step(s, layer);
    return sum / double(share);
  };
  for (int layer = 0; layer < layers; ++layer) out.push_back({average(0, layer), average(steps - share, layer)});
  return out;
}

}  // namespace mt
