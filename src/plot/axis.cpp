#include "plot/axis.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace mt::plot {

double nice_step(double range, int target) {
  if (!(range > 0) || target < 1) return 1;
  const double raw = range / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double n = raw / mag;
  return (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * mag;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  const double step = nice_step(hi - lo, target);
  std::vector<double> out;
  // Integer multiples, so 0.1 * 3 prints as 0.3 and no tick drifts off the range by rounding.
  const double eps = step * 1e-9;
  for (long long k = (long long)std::ceil((lo - eps) / step); k * step <= hi + eps; ++k) out.push_back(k * step);
  return out;
}

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> out;
  if (!(lo > 0) || !(hi >= lo)) return out;
  const bool fine = std::log10(hi / lo) < 3;
  const double eps = 1e-9;
  for (int e = (int)std::floor(std::log10(lo)); e <= (int)std::ceil(std::log10(hi)); ++e)
    for (double m : {1.0, 2.0, 5.0}) {
      if (m != 1 && !fine) continue;
      const double v = m * std::pow(10.0, e);
      if (v >= lo * (1 - eps) && v <= hi * (1 + eps)) out.push_back(v);
    }
  return out;
}

std::string tick_label(double v, double step) {
  char buf[64];
  const double a = std::fabs(v);
  if (a < step * 1e-6) return "0";
  if (a >= 1000) {
    const char* suffix[] = {"k", "M", "G", "T"};
    int i = 0;
    double div = 1000;
    while (i < 3 && a >= div * 1000) div *= 1000, ++i;
    const int decimals = std::max(0, (int)-std::floor(std::log10(step / div) + 1e-9));
    std::snprintf(buf, sizeof buf, "%.*f%s", decimals, v / div, suffix[i]);
    return buf;
  }
  const int decimals = std::max(0, (int)-std::floor(std::log10(step) + 1e-9));
  if (decimals <= 4) {
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  } else {
    // Digits from the value's own magnitude down to the spacing's.
    const int digits = std::max(0, (int)std::floor(std::log10(a) + 1e-9) + decimals);
    std::snprintf(buf, sizeof buf, "%.*e", digits, v);
  }
  return buf;
}

Axis::Axis(double lo, double hi, double from, double to, bool log)
    : lo_(lo), hi_(hi), from_(from), to_(to), log_(log) {
  if (log_) {
    if (!(lo_ > 0)) lo_ = hi_ > 0 ? hi_ / 10 : 1;
    if (!(hi_ > lo_)) lo_ /= 2, hi_ = lo_ * 4;
  } else if (!(hi_ > lo_)) {
    const double half = lo_ != 0 ? std::fabs(lo_) * 0.5 : 0.5;
    lo_ -= half, hi_ += half;
  }
}

double Axis::map(double v) const {
  const double t = log_ ? std::log(v / lo_) / std::log(hi_ / lo_) : (v - lo_) / (hi_ - lo_);
  return from_ + t * (to_ - from_);
}

std::vector<double> Axis::ticks() const { return log_ ? log_ticks(lo_, hi_) : nice_ticks(lo_, hi_); }

std::string Axis::label(double tick) const { return tick_label(tick, log_ ? tick : nice_step(hi_ - lo_, 6)); }

}  // namespace mt::plot
