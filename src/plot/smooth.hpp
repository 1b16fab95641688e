#pragma once
// Smoothing of noisy per-step series (loss, gradient norm, throughput), so the trend reads
// through the step-to-step noise.
#include <cstddef>
#include <vector>

namespace mt::plot {

// Centred running mean over 2 * half + 1 points (fewer at the ends); NaNs are left out of the
// means and stay NaN.
std::vector<double> smooth(const std::vector<double>& y, size_t half);
// The half-width for n points: about a 25th of the run, 0 (no smoothing) for short runs.
size_t smoothing_half_width(size_t n);

}  // namespace mt::plot
