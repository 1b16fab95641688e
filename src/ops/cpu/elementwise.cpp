#include <cmath>

#include "ops/bf16.hpp"
#include "ops/cpu/cpu_ops.hpp"
#include "ops/op_math.hpp"

namespace mt::cpu {

void swiglu_forward(DeviceState*, const SwigluForwardArgs& a) {
  if (a.h_bf16)
    for (size_t i = 0; i < a.n; ++i) a.h_bf16[i].bits = float_to_bf16_bits(swiglu(a.gate[i], a.up[i]));
  else
    for (size_t i = 0; i < a.n; ++i) a.h[i] = swiglu(a.gate[i], a.up[i]);
}

void swiglu_backward(DeviceState*, const SwigluBackwardArgs& a) {
  for (size_t i = 0; i < a.n; ++i) swiglu_grad(a.gate[i], a.up[i], a.dh[i], &a.dgate[i], &a.dup[i]);
}

void add(DeviceState*, const AddArgs& a) {
  for (size_t i = 0; i < a.n; ++i) a.y[i] += a.x[i];
}

void copy_columns(DeviceState*, const CopyColumnsArgs& a) {
  for (int r = 0; r < a.rows; ++r) {
    const float* src = a.src + size_t(r) * a.src_stride;
    if (a.dst_bf16) {
      Bf16* dst = a.dst_bf16 + size_t(r) * a.dst_stride;
      for (int c = 0; c < a.cols; ++c) dst[c].bits = float_to_bf16_bits(src[c]);
      continue;
    }
    float* dst = a.dst + size_t(r) * a.dst_stride;
    if (a.accumulate)
      for (int c = 0; c < a.cols; ++c) dst[c] += src[c];
    else
      std::copy(src, src + a.cols, dst);
  }
}

void embedding_forward(DeviceState*, const EmbeddingForwardArgs& a) {
  for (int r = 0; r < a.rows; ++r) {
    const float* src = a.table + size_t(a.tokens[r]) * a.dim;
    std::copy(src, src + a.dim, a.out + size_t(r) * a.dim);
  }
}

void embedding_backward(DeviceState*, const EmbeddingBackwardArgs& a) {
  for (int r = 0; r < a.rows; ++r) {
    float* dst = a.dtable + size_t(a.tokens[r]) * a.dim;
    const float* g = a.dout + size_t(r) * a.dim;
    for (int i = 0; i < a.dim; ++i) dst[i] += g[i];
  }
}

double cross_entropy(DeviceState*, const CrossEntropyArgs& a) {
  double total = 0;
  for (int r = 0; r < a.rows; ++r) {
    const float* z = a.logits + size_t(r) * a.vocab;
    float* dz = a.dlogits + size_t(r) * a.vocab;
    const int target = a.targets[r];
    if (target < 0) {
      a.losses[r] = 0;
      std::fill(dz, dz + a.vocab, 0.0f);
      continue;
    }
    float mx = z[0];
    for (int i = 1; i < a.vocab; ++i) mx = std::max(mx, z[i]);
    double sum = 0;
    for (int i = 0; i < a.vocab; ++i) sum += std::exp(double(z[i] - mx));
    const double logsum = std::log(sum) + mx;
    a.losses[r] = float(logsum - z[target]);
    total += logsum - z[target];
    for (int i = 0; i < a.vocab; ++i) dz[i] = a.grad_scale * float(std::exp(double(z[i]) - logsum));
    dz[target] -= a.grad_scale;
  }
  return total;
}

}  // namespace mt::cpu
