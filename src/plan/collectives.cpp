#include "plan/collectives.hpp"

#include <algorithm>

namespace mt::plan {

Span span(const Cluster& c, int n, int stride) {
  int per = std::clamp(c.domain / std::max(stride, 1), 1, n);
  return {per, (n + per - 1) / per};
}

double all_reduce_time(const Cluster& c, double bytes, int n, int stride) {
  if (n <= 1 || bytes <= 0) return 0;
  Span s = span(c, n, stride);
  double inside =
      s.per_domain > 1 ? 2.0 * (s.per_domain - 1) / s.per_domain * bytes / c.domain_bandwidth(s.per_domain) : 0;
  double across =
      s.domains > 1 ? 2.0 * (s.domains - 1) / s.domains * (bytes / s.per_domain) / c.scale_out_bandwidth : 0;
  return (inside + across) / c.bus_efficiency;
}

}  // namespace mt::plan
