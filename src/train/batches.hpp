#pragma once
// Which tokens each step sees. Window w of the stream is tokens [w*seq_len, (w+1)*seq_len] (inputs
// and the shifted targets), W the number of whole windows. Training sequence i (counted from the
// start of the run) is window order.window(i) (data_order.hpp: file order or shuffled per epoch),
// so the global batch of step s is sequences s*B .. s*B+B-1 whatever the layout, and the data
// position of a run is the number of sequences consumed. Validation reads a fixed set of N windows
// spread evenly over its stream, window k*W/N for k = 0..N-1, so every file has its share.
#include <vector>

#include "io/shards.hpp"
#include "train/data_order.hpp"

namespace mt {

class Batches {
 public:
  // In file order unless `shuffle`; `seed` keys the shuffled order.
  Batches(const TokenStream& stream, int seq_len, const std::string& key, bool shuffle = false, uint64_t seed = 0);
  // Fills inputs/targets ([count*seq_len] each) with sequences first..first+count-1.
  void fill(long long first, int count, std::vector<int>& inputs, std::vector<int>& targets) const;
  // Fills them with sequences first..first+count-1 of the `total` spread evenly over the stream.
  void fill_spread(long long first, int count, long long total, std::vector<int>& inputs,
                   std::vector<int>& targets) const;
  long long windows() const { return order_.windows(); }

 private:
  void fill_window(long long window, int row, std::vector<int>& inputs, std::vector<int>& targets) const;

  const TokenStream& stream_;
  int seq_len_;
  WindowOrder order_;
};

}  // namespace mt
