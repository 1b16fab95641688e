#pragma once
// Arguments of the token embedding ops.

namespace mt {

// out[r, :] = table[tokens[r], :] for r < rows, `dim` values a row.
struct EmbeddingForwardArgs {
  int rows = 0, dim = 0;
  const int* tokens = nullptr; const float* table = nullptr; float* out = nullptr;
};
// dtable[tokens[r], :] += dout[r, :], in row order.
struct EmbeddingBackwardArgs {
  int rows = 0, dim = 0;
  const int* tokens = nullptr; const float* dout = nullptr; float* dtable = nullptr;
};

}  // namespace mt
