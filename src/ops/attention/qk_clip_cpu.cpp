// QK-Clip's rescaling of a projection's rows (QkClipRowsArgs), plain loops: it touches a few rows of a
// few weights once per step.
#include <algorithm>
#include <cmath>

#include "ops/backend/cpu_ops.hpp"

namespace mt::cpu {

void qk_clip_rows(DeviceState*, const QkClipRowsArgs& a) {
  for (int h = 0; h < a.heads; ++h) {
    float s = a.max_logit[h];
    for (int c = 1; c < a.copies; ++c) s = std::max(s, a.max_logit[size_t(c) * a.stride + h]);
    if (!(s > a.tau)) continue;
    const float gamma = a.tau / s, factor = a.power == 1.0f ? gamma : std::sqrt(gamma);
    for (int r = a.begin; r < a.end; ++r) {
      float* row = a.w + (size_t(h) * a.head_rows + r) * a.cols;
      for (int c = 0; c < a.cols; ++c) row[c] *= factor;
    }
  }
}

}  // namespace mt::cpu
