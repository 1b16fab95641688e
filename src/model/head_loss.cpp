#include "model/head_loss.hpp"

#include <algorithm>

namespace mt {

int head_chunk_rows(int rows, int chunk_tokens) { return chunk_tokens > 0 ? std::min(rows, chunk_tokens) : rows; }

void head_loss(const LayerEnv& env, Arena& work, const HeadLossArgs& a) {
  const Backend& be = env.be();
  const int step = head_chunk_rows(a.rows, a.chunk_rows), D = a.dim, V = a.vocab;
  float* logits = work.floats(size_t(step) * V);
  for (int first = 0; first < a.rows; first += step) {
    const int n = std::min(step, a.rows - first);
    const float* x = a.x + size_t(first) * D;
    env.linear_forward(x, a.weight, n, D, V, logits);
    if (a.logits) be.copy(a.logits + size_t(first) * V, logits, size_t(n) * V * sizeof(float));
    // The gradient overwrites the logits: nothing reads them after the loss.
    be.cross_entropy({.rows = n, .vocab = V, .grad_scale = a.grad_scale, .logits = logits,
                      .targets = a.targets + first, .losses = a.losses + first, .dlogits = logits, .sum = a.sum,
                      .divisor = a.divisor});
    if (!a.dx) continue;
    env.linear_backward_input(logits, a.weight, n, D, V, a.dx + size_t(first) * D);
    env.linear_backward_weight(logits, x, n, D, V, a.dweight);
  }
}

}  // namespace mt
