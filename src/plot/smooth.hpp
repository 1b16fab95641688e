#pragma once
// Smoothing of noisy per-step series (loss, gradient norm, throughput), so the trend reads
// through the step-to-step noise. The window is a number of steps, the same for every run of a chart,
// so runs that logged the same values draw the same curve over the steps they share.
#include <cstddef>
#include <vector>

namespace mt::plot {

// The mean of y over the steps (x[i] - window, x[i]]: the point and the ones logged in the window
// steps up to it, so what comes after a step never changes its value. NaNs are left out of the means
// and stay NaN; a window of 0 or 1 returns y.
std::vector<double> smooth(const std::vector<double>& x, const std::vector<double>& y, long long window);
// The default window for runs whose longest has `steps` steps: about a 25th of it, 0 (no smoothing)
// below 50 steps.
long long default_smoothing_window(long long steps);

}  // namespace mt::plot
