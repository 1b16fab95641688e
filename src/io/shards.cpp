#include "io/shards.hpp"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "util/error.hpp"

namespace mt {

void write_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  if (tokens.size() > size_t(INT32_MAX)) throw UserError(path + ": too many tokens for one shard (max 2^31-1)");
  int32_t header[256] = {};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = int32_t(tokens.size());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(reinterpret_cast<const char*>(header), sizeof(header));
    out.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 2));
    if (!out) throw UserError(path + ": cannot write the shard (is the directory writable and the disk not full?)");
  }
  std::filesystem::rename(tmp, path);
}

namespace {

constexpr int32_t kLlama3ShardMagic = 20240801;

// The header's token count of the shard `in` reads (at its start), after checking the header and
// the file's size; `in` is left at the first token.
size_t checked_count(std::ifstream& in, const std::string& path) {
  if (!in) throw UserError(path + ": cannot open the token shard");
  int32_t header[256];
  in.read(reinterpret_cast<char*>(header), sizeof(header));
  if (!in) throw UserError(path + ": shorter than the 1024-byte shard header; not a token shard");
  if (header[0] == kLlama3ShardMagic)
    throw UserError(path + ": byte 0: magic number " + std::to_string(kLlama3ShardMagic) +
                    ": llm.c's Llama 3 format, uint32 tokens; moetrain reads the GPT-2 format, magic " +
                    std::to_string(kShardMagic) + " with uint16 tokens (make shards with `moetrain prepare`)");
  if (header[0] != kShardMagic)
    throw UserError(path + ": byte 0: magic number " + std::to_string(header[0]) + ", expected " +
                    std::to_string(kShardMagic) + " (llm.c GPT-2 format; make shards with `moetrain prepare`)");
  if (header[1] != kShardVersion)
    throw UserError(path + ": byte 4: shard version " + std::to_string(header[1]) + ", expected 1 (uint16 tokens)");
  if (header[2] < 0) throw UserError(path + ": byte 8: negative token count in the header");
  // llm.c leaves the rest of the header zero; anything there is a format this reader does not know.
  for (int k = 3; k < 256; ++k)
    if (header[k] != 0)
      throw UserError(path + ": byte " + std::to_string(4 * k) + ": header int " + std::to_string(k) + " is " +
                      std::to_string(header[k]) + ", expected 0 (llm.c's format uses ints 0-2 only; another format?)");
  const size_t n = size_t(header[2]);
  const auto file_size = std::filesystem::file_size(path);
  if (file_size != 1024 + 2 * n)
    throw UserError(path + ": header says " + std::to_string(n) + " tokens, so the file should be " +
                    std::to_string(1024 + 2 * n) + " bytes, but it is " + std::to_string(file_size) +
                    " (truncated or corrupt shard)");
  return n;
}

}  // namespace

std::vector<uint16_t> read_shard(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const size_t n = checked_count(in, path);
  std::vector<uint16_t> tokens(n);
  in.read(reinterpret_cast<char*>(tokens.data()), std::streamsize(n * 2));
  if (!in) throw UserError(path + ": could not read the tokens");
  return tokens;
}

TokenStream::TokenStream(const std::string& pattern, const std::string& key, int vocab_size) {
  glob_t g{};
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) files_.push_back(g.gl_pathv[i]);
  globfree(&g);
  if (files_.empty())
    throw UserError(key + " = \"" + pattern + "\": no shard matches this path (run `moetrain prepare` first, "
                    "or `make run`, which prepares the fortunes demo data)");
  std::vector<size_t> counts(65536, 0);
  for (const std::string& f : files_) {
    std::ifstream header(f, std::ios::binary);
    const size_t count = checked_count(header, f), bytes = 1024 + 2 * count;
    // The descriptor is closed once mapped: a run over thousands of shards would run out of them.
    const int fd = ::open(f.c_str(), O_RDONLY);
    if (fd < 0) throw UserError(f + ": cannot open the token shard");
    struct stat st {};
    ::fstat(fd, &st);
    void* base = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (base == MAP_FAILED) throw UserError(f + ": cannot map the token shard into memory");
    Mapped& m = shards_.emplace_back(Mapped{std::unique_ptr<void, Unmap>(base, Unmap{bytes}),
                                            reinterpret_cast<const uint16_t*>(static_cast<const char*>(base) + 1024),
                                            size_, count, uint64_t(st.st_dev), uint64_t(st.st_ino)});
    check_present(m.first, m.first + m.count);  // the file may have shrunk since its header was read
    // One pass over the shard: every id within the vocabulary, and the frequencies.
    ::madvise(base, bytes, MADV_SEQUENTIAL);
    for (size_t i = 0; i < m.count; ++i) {
      if (m.tokens[i] >= vocab_size)
        throw UserError(f + ": byte " + std::to_string(1024 + 2 * i) + ": token " + std::to_string(m.tokens[i]) +
                        " at position " + std::to_string(i) +
                        " is outside model.vocab_size = " + std::to_string(vocab_size) +
                        " (raise model.vocab_size or use shards made with this vocabulary)");
      ++counts[m.tokens[i]];
    }
    ::madvise(base, bytes, MADV_RANDOM);
    size_ += m.count;
  }
  for (size_t c : counts)
    if (c) entropy_ -= double(c) / double(size_) * std::log(double(c) / double(size_));
}

// The shard holding token i: the last whose first token is at or before it.
size_t TokenStream::shard_of(size_t i) const {
  size_t lo = 0, hi = shards_.size();
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    (shards_[mid].first <= i ? lo : hi) = mid;
  }
  return lo;
}

uint16_t TokenStream::operator[](size_t i) const {
  if (i - shards_[last_].first >= shards_[last_].count) last_ = shard_of(i);
  return shards_[last_].tokens[i - shards_[last_].first];
}

void TokenStream::check_present(size_t begin, size_t end) const {
  for (size_t s = shard_of(begin); s < shards_.size() && shards_[s].first < end; ++s) {
    const Mapped& m = shards_[s];
    struct stat st {};
    // A shard deleted or replaced under its name leaves the run the file it mapped, whole.
    if (::stat(files_[s].c_str(), &st) != 0 || uint64_t(st.st_dev) != m.device || uint64_t(st.st_ino) != m.inode)
      continue;
    const size_t needed = 1024 + 2 * std::min(m.count, end - m.first);
    if (size_t(st.st_size) < needed)
      throw ShardChanged(files_[s] + ": the shard is now " + std::to_string(st.st_size) + " bytes, but it held " +
                         std::to_string(1024 + 2 * m.count) + " when the run opened it (truncated or rewritten "
                         "while the run read it?); put back the complete shard, or make it again with the same "
                         "`moetrain prepare`");
  }
}

double unigram_entropy(const std::vector<uint16_t>& tokens) {
  std::vector<size_t> counts(65536, 0);
  for (uint16_t t : tokens) counts[t]++;
  double h = 0;
  for (size_t c : counts)
    if (c) h -= double(c) / tokens.size() * std::log(double(c) / tokens.size());
  return h;
}

}  // namespace mt
