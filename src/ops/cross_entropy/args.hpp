#pragma once
// Arguments of the softmax cross-entropy op.

namespace mt {

// Per-row softmax cross-entropy. Rows whose target is negative are ignored. Writes each row's
// loss and dlogits = grad_scale * (softmax - onehot); returns the sum of the row losses.
struct CrossEntropyArgs {
  int rows = 0, vocab = 0; float grad_scale = 1.0f;
  const float* logits = nullptr; const int* targets = nullptr;
  float* losses = nullptr; float* dlogits = nullptr;
};

}  // namespace mt
