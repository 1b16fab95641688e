#include <cmath>
#include <vector>

#include "ops/cpu/cpu_ops.hpp"

namespace mt::cpu {

void rope(DeviceState*, const RopeArgs& a) {
  const int pairs = a.rot_dim / 2;
  // One cos/sin table per call: the angles depend only on (position, pair).
  std::vector<float> cos_t(size_t(a.seq_len) * pairs), sin_t(cos_t.size());
  for (int i = 0; i < pairs; ++i) {
    const double freq = std::pow(double(a.theta), -2.0 * i / a.rot_dim);
    for (int pos = 0; pos < a.seq_len; ++pos) {
      const double angle = pos * freq;
      cos_t[size_t(pos) * pairs + i] = float(std::cos(angle));
      sin_t[size_t(pos) * pairs + i] = float(a.inverse ? -std::sin(angle) : std::sin(angle));
    }
  }
  for (int r = 0; r < a.rows; ++r) {
    const float* c = cos_t.data() + size_t(r % a.seq_len) * pairs;
    const float* s = sin_t.data() + size_t(r % a.seq_len) * pairs;
    for (int h = 0; h < a.heads; ++h) {
      float* x = a.x + (size_t(r) * a.heads + h) * a.head_dim + a.rot_offset;
      for (int i = 0; i < pairs; ++i) {
        const float x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = x0 * c[i] - x1 * s[i];
        x[2 * i + 1] = x0 * s[i] + x1 * c[i];
      }
    }
  }
}

}  // namespace mt::cpu
