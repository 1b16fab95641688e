#pragma once
// The per-row arithmetic of tiled (flash-style) softmax attention, shared by the CUDA kernels
// (cuda.cu, cuda_tc.cu) and a CPU unit test that checks the tiled recurrence against a plain
// softmax, so the kernels' math is proven without a GPU.
//
// A row's scores arrive tile by tile. The state keeps the running maximum m and the running
// sum l = sum exp(s - m) over the scores seen so far; the output accumulator acc holds
// sum exp(s - m) v. When a tile raises the maximum, l and acc are multiplied by exp(m_old -
// m_new), after which acc / l is the softmax-weighted average and m + log(l) the log-sum-exp.
// Masked scores are -inf and weigh 0, also while every score seen so far is masked.
#include <cmath>

#include "ops/host_device.hpp"

namespace mt {

struct OnlineSoftmax {
  float max = -INFINITY;
  float sum = 0.0f;

  // Takes the maximum of the next tile's scores; returns the factor for acc (sum is rescaled here).
  MT_HD float rescale(float tile_max) {
    const float m = fmaxf(max, tile_max);
    const float alpha = m == -INFINITY ? 0.0f : expf(max - m);
    max = m;
    sum *= alpha;
    return alpha;
  }
  // The weight of score s in the current tile, exp(s - max); call after rescale().
  MT_HD float weight(float s) const { return s == -INFINITY ? 0.0f : expf(s - max); }
  // Adds the sum of the current tile's weights.
  MT_HD void add(float tile_sum) { sum += tile_sum; }
  // The row's log-sum-exp once every tile is in.
  MT_HD float lse() const { return max + logf(sum); }
  // The output element from its accumulator once every tile is in.
  MT_HD float normalise(float acc) const { return acc / sum; }
};

// Backward's probability of a score, recomputed from the row's saved log-sum-exp.
MT_HD inline float softmax_prob(float s, float lse) { return s == -INFINITY ? 0.0f : expf(s - lse); }

}  // namespace mt

