#pragma once
// Which tokens each step sees. The run reads sequences in order: sequence i (counted from the
// start of the run) is window i mod W of the stream, window w being tokens [w*seq_len,
// (w+1)*seq_len] (inputs and the shifted targets), W the number of whole windows. So the global
// batch of step s is sequences s*B .. s*B+B-1 whatever the layout, and the data position of a
// run is the number of sequences consumed.
#include <vector>

#include "io/shards.hpp"

namespace mt {

class Batches {
 public:
  Batches(const TokenStream& stream, int seq_len, const std::string& key);
  // Fills inputs/targets ([count*seq_len] each) with sequences first..first+count-1.
  void fill(long long first, int count, std::vector<int>& inputs, std::vector<int>& targets) const;

 private:
  const TokenStream& stream_;
  int seq_len_;
  long long windows_;
};

}  // namespace mt
