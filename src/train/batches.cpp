#include "train/batches.hpp"

#include "util/error.hpp"

namespace mt {

Batches::Batches(const TokenStream& stream, int seq_len, const std::string& key) : stream_(stream), seq_len_(seq_len) {
  if (stream.size() < size_t(seq_len) + 2)
    throw UserError(key + ": the shards hold " + std::to_string(stream.size()) + " tokens, fewer than model.seq_len + 2 = " +
                    std::to_string(seq_len + 2) + " (use more data or a shorter model.seq_len)");
  windows_ = (long long)((stream.size() - seq_len - 1) / seq_len) + 1;
}

void Batches::fill(long long first, int count, std::vector<int>& inputs, std::vector<int>& targets) const {
  inputs.resize(size_t(count) * seq_len_);
  targets.resize(size_t(count) * seq_len_);
  for (int j = 0; j < count; ++j) {
    const size_t start = size_t((first + j) % windows_) * seq_len_;
    stream_.check_present(start, start + seq_len_ + 1);
    for (int t = 0; t < seq_len_; ++t) {
      inputs[size_t(j) * seq_len_ + t] = stream_[start + t];
      targets[size_t(j) * seq_len_ + t] = stream_[start + t + 1];
    }
  }
}

}  // namespace mt
