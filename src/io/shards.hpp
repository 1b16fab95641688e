#pragma once
// Token shards in llm.c's format: a 256 x int32 header (magic 20240520, version 1, token count),
// then that many uint16 tokens. A TokenStream concatenates the shards matched by a path or glob.
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;

void write_shard(const std::string& path, const std::vector<uint16_t>& tokens);
// Reads and validates one shard; errors name the file and what is wrong.
std::vector<uint16_t> read_shard(const std::string& path);

// Entropy (nats) of the token frequencies: the loss of the best model that ignores context.
double unigram_entropy(const std::vector<uint16_t>& tokens);

class TokenStream {
 public:
  // `pattern` may contain * and ?; `key` names the config key for error messages.
  TokenStream(const std::string& pattern, const std::string& key, int vocab_size);
  size_t size() const { return tokens_.size(); }
  uint16_t operator[](size_t i) const { return tokens_[i]; }
  const std::vector<std::string>& files() const { return files_; }
  double unigram_entropy() const { return mt::unigram_entropy(tokens_); }

 private:
  std::vector<std::string> files_;
  std::vector<uint16_t> tokens_;
};

}  // namespace mt
