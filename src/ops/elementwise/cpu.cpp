#include <algorithm>

#include "ops/bf16.hpp"
#include "ops/backend/cpu_ops.hpp"
#include "ops/elementwise/math.hpp"
#include "util/error.hpp"

namespace mt::cpu {

void swiglu_forward(DeviceState*, const SwigluForwardArgs& a) {
  for (size_t i = 0; i < a.n; ++i) {
    const float h = swiglu(input_at(a.gate, a.gate_bf16, i), input_at(a.up, a.up_bf16, i));
    if (a.h_bf16) a.h_bf16[i].bits = float_to_bf16_bits(h);
    else a.h[i] = h;
  }
  if (a.fp8.codes) fp8_code_rows(a.h, int(a.n / size_t(a.cols)), a.cols, a.fp8);
}

void swiglu_backward(DeviceState*, const SwigluBackwardArgs& a) {
  for (size_t i = 0; i < a.n; ++i)
    swiglu_grad(input_at(a.gate, a.gate_bf16, i), input_at(a.up, a.up_bf16, i), input_at(a.dh, a.dh_bf16, i),
                &a.dgate[i], &a.dup[i]);
  if (a.dgate_fp8.codes) fp8_code_rows(a.dgate, int(a.n / size_t(a.cols)), a.cols, a.dgate_fp8);
  if (a.dup_fp8.codes) fp8_code_rows(a.dup, int(a.n / size_t(a.cols)), a.cols, a.dup_fp8);
}

void add(DeviceState*, const AddArgs& a) {
  for (size_t i = 0; i < a.n; ++i) a.y[i] = input_at(a.y, a.y_bf16, i) + a.x[i];
}

void copy_columns(DeviceState*, const CopyColumnsArgs& a) {
  MT_CHECK(a.groups >= 1 && (a.dst_group != 0 || a.groups == 1 || !a.dst_bf16));
  for (int g = 0; g < a.groups; ++g) {
    const bool add = a.accumulate || (g > 0 && a.dst_group == 0);
    for (int r = 0; r < a.rows; ++r) {
      const float* src = a.src + size_t(g) * a.src_group + size_t(r) * a.src_stride;
      const size_t at = size_t(g) * a.dst_group + size_t(r) * a.dst_stride;
      if (a.dst_bf16) {
        Bf16* dst = a.dst_bf16 + at;
        for (int c = 0; c < a.cols; ++c) dst[c].bits = float_to_bf16_bits(src[c]);
        continue;
      }
      float* dst = a.dst + at;
      if (add)
        for (int c = 0; c < a.cols; ++c) dst[c] += src[c];
      else
        std::copy(src, src + a.cols, dst);
    }
  }
}

}  // namespace mt::cpu
