// Reference Muon ops: the momentum, the Newton-Schulz iteration in plain loops (the order that
// ops/optimizer/newton_schulz.hpp states) and the update.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/backend/cpu_ops.hpp"
#include "ops/bf16.hpp"
#include "ops/optimizer/math.hpp"
#include "ops/optimizer/newton_schulz.hpp"

namespace mt::cpu {

namespace {

// c[m, n] = a[m, k] b[k, n], row-major; each c[i][j] sums over k in ascending order (the loop over j
// innermost leaves every element's order alone). bf16: the factors rounded to bfloat16 first.
void product(const float* a, const float* b, float* c, int m, int n, int k, bool bf16) {
  std::vector<float> ra, rb;
  if (bf16) {
    ra.assign(a, a + size_t(m) * k), rb.assign(b, b + size_t(k) * n);
    for (float& v : ra) v = round_to_bf16(v);
    for (float& v : rb) v = round_to_bf16(v);
    a = ra.data(), b = rb.data();
  }
  for (int i = 0; i < m; ++i) {
    float* row = c + size_t(i) * n;
    std::fill(row, row + n, 0.0f);
    for (int p = 0; p < k; ++p) {
      const float f = a[size_t(i) * k + p];
      const float* bp = b + size_t(p) * n;
      for (int j = 0; j < n; ++j) row[j] += f * bp[j];
    }
  }
}

void transpose(const float* in, float* out, int rows, int cols) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[size_t(c) * rows + r] = in[size_t(r) * cols + c];
}

void orthogonalise(const NewtonSchulzArgs& a, float* m, float* work) {
  const bool tall = a.rows > a.cols, bf16 = a.inputs != GemmPrecision::fp32;
  const int s = tall ? a.cols : a.rows, l = tall ? a.rows : a.cols;
  const size_t sl = size_t(s) * l;
  float *x = work, *y = work + sl, *gram = work + 2 * sl, *poly = gram + size_t(s) * s;
  if (tall) transpose(m, x, a.rows, a.cols);
  else std::copy_n(m, sl, x);
  double ss = 0;
  for (size_t i = 0; i < sl; ++i) ss += double(x[i]) * x[i];
  const float inv = float(1.0 / std::max(std::sqrt(ss), a.eps));
  for (size_t i = 0; i < sl; ++i) x[i] *= inv;
  for (int step = 0; step < a.steps; ++step) {
    transpose(x, y, s, l);  // X^T, in y until the step's last product
    product(x, y, gram, s, s, l, bf16);
    product(gram, gram, poly, s, s, s, bf16);
    for (size_t i = 0; i < size_t(s) * s; ++i) poly[i] = a.b * gram[i] + a.c * poly[i];
    product(poly, x, y, s, l, s, bf16);
    for (size_t i = 0; i < sl; ++i) x[i] = a.a * x[i] + y[i];
  }
  if (tall) transpose(x, m, s, l);
  else std::copy_n(x, sl, m);
}

}  // namespace

void muon_momentum(DeviceState*, const MuonMomentumArgs& a) {
  if (!guard_passes(a.guard)) return;
  for (size_t i = 0; i < a.n; ++i) muon_momentum_element(a.grad[i], a.buf[i], a.update[i], a.momentum, a.nesterov);
}

void newton_schulz(DeviceState*, const NewtonSchulzArgs& a) {
  const size_t each = size_t(a.rows) * a.cols, work = newton_schulz_work(a.rows, a.cols);
  for (int i = 0; i < a.count; ++i) orthogonalise(a, a.x + i * each, a.work + i * work);
}

void muon_apply(DeviceState*, const MuonApplyArgs& a) {
  if (!guard_passes(a.guard)) return;
  const float lr_scaled = float(a.step->lr * a.scale), decay = float(a.step->decay);
  for (size_t i = 0; i < a.n; ++i) muon_apply_element(a.update[i], a.value[i], lr_scaled, decay);
}

}  // namespace mt::cpu
