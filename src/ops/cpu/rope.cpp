#include <cmath>

#include "ops/cpu/cpu_ops.hpp"

namespace mt::cpu {

void rope(DeviceState*, const RopeArgs& a) {
  const int pairs = a.rot_dim / 2;
  for (int r = 0; r < a.rows; ++r) {
    const int pos = r % a.seq_len;
    for (int h = 0; h < a.heads; ++h) {
      float* x = a.x + (size_t(r) * a.heads + h) * a.head_dim + a.rot_offset;
      for (int i = 0; i < pairs; ++i) {
        const double freq = std::pow(double(a.theta), -2.0 * i / a.rot_dim);
        const double angle = pos * freq;
        const float c = float(std::cos(angle)), s = float(a.inverse ? -std::sin(angle) : std::sin(angle));
        const float x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = x0 * c - x1 * s;
        x[2 * i + 1] = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace mt::cpu
