#pragma once
// The numbers `inspect` distils from a run's series: smoothed losses, medians of speed, and the
// expert-load imbalance. Pure functions of the series.
#include <cstddef>
#include <vector>

namespace mt {

// Mean of the last `window` values (all of them when fewer); NaN for none.
double tail_mean(const std::vector<double>& v, size_t window);

// The lowest mean over `window` consecutive values (the whole series when shorter): its mean
// and the index of its last value. {NaN, 0} for an empty series.
struct WindowMean {
  double mean;
  size_t last;
};
WindowMean best_window_mean(const std::vector<double>& v, size_t window);

// Median of the values after the first (the first step includes warm-up: allocation, caches);
// the first alone when it is the only one. NaN values (MFU without a known peak) are left out;
// NaN when nothing is left.
double median_after_first(const std::vector<double>& v);

// Imbalance of the expert load of one MoE layer at one step: the busiest expert's load over the
// mean load (1: even; the expert count: every token on one expert); averaged over the first and
// the last tenth of the steps (at least one step each). load is [step][layer][expert].
struct Imbalance {
  double first, last;
};
std::vector<Imbalance> expert_imbalance(const std::vector<float>& load, size_t steps, int layers, int experts);

}  // namespace mt
