#include "train/batches.hpp"

#include "util/error.hpp"

namespace mt {

namespace {

long long whole_windows(const TokenStream& stream, int seq_len, const std::string& key) {
  if (stream.size() < size_t(seq_len) + 2)
    throw UserError(key + ": the shards hold " + std::to_string(stream.size()) +
                    " tokens, fewer than model.seq_len + 2 = " + std::to_string(seq_len + 2) +
                    " (use more data or a shorter model.seq_len)");
  return (long long)((stream.size() - seq_len - 1) / seq_len) + 1;
}

}  // namespace

Batches::Batches(const TokenStream& stream, int seq_len, const std::string& key, bool shuffle, uint64_t seed)
    : stream_(stream), seq_len_(seq_len), order_(whole_windows(stream, seq_len, key), shuffle, seed) {}

void Batches::fill(long long first, int count, std::vector<int>& inputs, std::vector<int>& targets) const {
  inputs.resize(size_t(count) * seq_len_);
  targets.resize(size_t(count) * seq_len_);
  for (int j = 0; j < count; ++j) fill_window(order_.window(first + j), j, inputs, targets);
}

void Batches::fill_spread(long long first, int count, long long total, std::vector<int>& inputs,
                          std::vector<int>& targets) const {
  inputs.resize(size_t(count) * seq_len_);
  targets.resize(size_t(count) * seq_len_);
  for (int j = 0; j < count; ++j) fill_window((first + j) * windows() / total, j, inputs, targets);
}

void Batches::fill_window(long long window, int row, std::vector<int>& inputs, std::vector<int>& targets) const {
  const size_t start = size_t(window) * seq_len_;
  stream_.check_present(start, start + seq_len_ + 1);
  for (int t = 0; t < seq_len_; ++t) {
    inputs[size_t(row) * seq_len_ + t] = stream_[start + t];
    targets[size_t(row) * seq_len_ + t] = stream_[start + t + 1];
  }
}

}  // namespace mt
