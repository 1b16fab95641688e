#pragma once
// The output head and its cross-entropy over chunks of tokens: per chunk, the logits, the loss
// and its gradient in place, then (when a backward pass follows) the gradient w.r.t. the head's
// input and the head weight's gradient, so the logits of a whole micro-batch never exist at once.
#include "model/layer_env.hpp"

namespace mt {

struct HeadLossArgs {
  int rows = 0, dim = 0, vocab = 0;
  int chunk_rows = 0;  // rows per chunk (the last may be shorter); 0: every row in one chunk
  const float* x = nullptr;  // [rows, dim]: the head's input (the normed hidden states)
  WeightOperand weight;      // [vocab, dim]
  const int* targets = nullptr;  // [rows]; negative: no loss
  float grad_scale = 1.0f;
  double* sum = nullptr;  // as CrossEntropyArgs::sum, with `divisor`
  double divisor = 1.0;
  float* losses = nullptr;  // [rows]
  float* dx = nullptr;      // [rows, dim]: the gradient w.r.t. x, written; null: no backward follows
  float* dweight = nullptr;  // [vocab, dim]: += the weight's gradient; null with dx
  float* logits = nullptr;   // [rows, vocab]: a copy of the logits before the loss overwrites them; null: none
};

// The rows of one chunk: what the caller's arena must hold for head_loss's logits (floats = this * vocab).
int head_chunk_rows(int rows, int chunk_tokens);

// Runs the chunks in row order, each chunk's logits in one buffer of `work` (taken once). The
// chunk count depends only on the shape, so a step repeats the same ops. With one chunk the
// results equal the unchunked ops' bit for bit; with more, dx and each row's loss still do
// (rows are independent) and the weight's gradient and the loss sum add chunk by chunk.
void head_loss(const LayerEnv& env, Arena& work, const HeadLossArgs& a);

}  // namespace mt
