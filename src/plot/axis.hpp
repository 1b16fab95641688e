#pragma once
// Chart axes: a data range mapped onto pixels, linearly or logarithmically, with "nice" tick
// marks (1, 2 or 5 times a power of ten) and labels with no more digits than the spacing needs.
#include <string>
#include <vector>

namespace mt::plot {

// The tick spacing for about `target` ticks over `range`: 1, 2 or 5 times a power of ten.
double nice_step(double range, int target);
// Multiples of nice_step inside [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int target = 6);
// Powers of ten inside [lo, hi] (lo > 0); over fewer than three decades also their 2x and 5x.
std::vector<double> log_ticks(double lo, double hi);
// v as a tick label when ticks are `step` apart: "0.25", "16k", "3e-05".
std::string tick_label(double v, double step);

class Axis {
 public:
  // Data [lo, hi] onto pixels [from, to] (to < from for a y axis, which grows upwards). An empty
  // range is widened around its value; a log axis needs lo > 0.
  Axis(double lo, double hi, double from, double to, bool log);
  double map(double v) const;
  std::vector<double> ticks() const;
  std::string label(double tick) const;
  double lo() const { return lo_; }
  double hi() const { return hi_; }
  bool log() const { return log_; }

 private:
  double lo_, hi_, from_, to_;
  bool log_;
};

}  // namespace mt::plot
