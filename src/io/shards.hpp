#pragma once
// Token shards in llm.c's format: a 256 x int32 header (magic 20240520, version 1, token count),
// then that many uint16 tokens. A TokenStream concatenates the shards matched by a path or glob.
#include <sys/mman.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/error.hpp"

namespace mt {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;

void write_shard(const std::string& path, const std::vector<uint16_t>& tokens);
// Reads and validates one shard; errors name the file and what is wrong.
std::vector<uint16_t> read_shard(const std::string& path);

// Entropy (nats) of the token frequencies: the loss of the best model that ignores context.
double unigram_entropy(const std::vector<uint16_t>& tokens);

// A shard that changed on disk since the run opened it (truncated or rewritten in place).
struct ShardChanged : UserError {
  using UserError::UserError;
};

// The shards matched by a path or glob, as one stream of tokens. Each shard is mapped into memory
// (read only), not copied: ranks on one node share the page cache's one copy, and only the windows
// a rank reads are ever paged in after the one pass that checks the ids at opening. Shards of any
// size (offsets are 64-bit; a shard holds up to 2^31 - 1 tokens, 4 GiB).
class TokenStream {
 public:
  // `pattern` may contain * and ?; `key` names the config key for error messages.
  TokenStream(const std::string& pattern, const std::string& key, int vocab_size);
  size_t size() const { return size_; }
  uint16_t operator[](size_t i) const;
  // Throws ShardChanged naming the shard when a shard holding tokens [begin, end) is now shorter
  // than when it was opened (truncated in place): reading its mapping past the file's end would
  // kill the process (SIGBUS). Call before reading a window.
  void check_present(size_t begin, size_t end) const;
  const std::vector<std::string>& files() const { return files_; }
  double unigram_entropy() const { return entropy_; }

 private:
  struct Unmap {
    size_t bytes;
    void operator()(void* p) const { ::munmap(p, bytes); }
  };
  struct Mapped {
    std::unique_ptr<void, Unmap> file;  // the whole file, mapped
    const uint16_t* tokens = nullptr;
    size_t first = 0, count = 0;  // position of its first token in the stream; tokens
    uint64_t device = 0, inode = 0;  // the file mapped: a file renamed over it later leaves the mapping whole
  };
  size_t shard_of(size_t i) const;
  std::vector<std::string> files_;
  std::vector<Mapped> shards_;
  size_t size_ = 0;
  double entropy_ = 0;
  mutable size_t last_ = 0;  // the shard of the last lookup (reads go window by window)
};

}  // namespace mt
