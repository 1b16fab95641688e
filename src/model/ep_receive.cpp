#include "model/ep_receive.hpp"

#include <algorithm>
#include <cmath>

namespace mt {

long ep_worst_rows(const EpReceive& r, int tokens) {
  return long(r.ep) * tokens * std::min(r.top_k, r.experts / r.ep);
}

long ep_average_rows(const EpReceive& r, int tokens) { return long(tokens) * r.top_k; }

long ep_reserved_rows(const EpReceive& r, int tokens) {
  const long worst = ep_worst_rows(r, tokens);
  if (r.bound <= 0) return worst;
  return std::min(worst, long(std::ceil(r.bound * double(ep_average_rows(r, tokens)))));
}

double ep_bound_for(const EpReceive& r, int tokens, long rows) {
  const long average = std::max(1L, ep_average_rows(r, tokens));
  return double((100 * rows + average - 1) / average) / 100.0;
}

}  // namespace mt
