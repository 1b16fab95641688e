#pragma once
// Arguments of the softmax cross-entropy op.

namespace mt {

// Per-row softmax cross-entropy. Rows whose target is negative are ignored. Writes each row's
// loss and dlogits = grad_scale * (softmax - onehot), and adds the sum of the row losses divided by
// `divisor` to *sum (device memory, null: not summed), so a step's micro-batches add up on the device.
struct CrossEntropyArgs {
  int rows = 0, vocab = 0; float grad_scale = 1.0f;
  const float* logits = nullptr; const int* targets = nullptr;
  float* losses = nullptr; float* dlogits = nullptr;
  double* sum = nullptr; double divisor = 1.0;
};

}  // namespace mt
