#include <algorithm>
#include <vector>

#include "ops/bf16.hpp"

#include "ops/backend/cpu_ops.hpp"
#include "ops/rope/math.hpp"
#include "util/error.hpp"

namespace mt::cpu {

void rope(DeviceState*, const RopeArgs& a) {
  MT_CHECK(!a.x_bf16 || (a.out_bf16 && !a.x));
  const int pairs = a.rot_dim / 2;
  // One cos/sin table per call: the angles depend only on (position, pair).
  std::vector<float> cos_t(size_t(a.seq_len) * pairs), sin_t(cos_t.size());
  for (int pos = 0; pos < a.seq_len; ++pos)
    for (int i = 0; i < pairs; ++i) {
      const size_t at = size_t(pos) * pairs + i;
      rope_cos_sin(a.first_position + pos, i, a.rot_dim, a.theta, a.scaling, a.inverse, &cos_t[at], &sin_t[at]);
    }
  std::vector<float> head(a.out_bf16 ? size_t(a.head_dim) : 0);
  for (int r = 0; r < a.rows; ++r) {
    const float* c = cos_t.data() + size_t(r % a.seq_len) * pairs;
    const float* s = sin_t.data() + size_t(r % a.seq_len) * pairs;
    for (int h = 0; h < a.heads; ++h) {
      const size_t at = (size_t(r) * a.heads + h) * a.head_dim;
      float* x = a.x ? a.x + at : nullptr;
      if (a.out_bf16) {  // rotate a copy: x stays as it is
        for (int f = 0; f < a.head_dim; ++f) head[f] = a.x_bf16 ? bf16_bits_to_float(a.x_bf16[at + f].bits) : x[f];
        x = head.data();
      }
      for (int i = 0; i < pairs; ++i) rope_rotate(x + a.rot_offset + 2 * i, c[i], s[i]);
      if (a.out_bf16)
        for (int f = 0; f < a.head_dim; ++f) a.out_bf16[at + f].bits = float_to_bf16_bits(x[f]);
    }
  }
}

}  // namespace mt::cpu
