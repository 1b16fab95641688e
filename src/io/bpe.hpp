#pragma once
// Byte-level BPE, trained by `moetrain prepare --vocab N`.
// Tokens 0..255 are the bytes, 256 marks a document's start (as in the byte tokenizer), and token
// 257 + i is merge i: its pair's two tokens joined. Text is cut into chunks before every space
// (" the", " cat", "\n" stays inside a chunk); merges never cross a chunk boundary.
// Encoding a chunk applies the merges by rank: the lowest-ranked adjacent pair first, each
// occurrence left to right, until no adjacent pair is a merge (as GPT-2's and Hugging Face's BPE
// do, so the exported tokenizer.json gives the same ids).
// Training is deterministic: each step merges the most frequent adjacent pair over the chunks of
// the training documents (ties: the smaller left id, then the smaller right id).
//
// File format (tokenizer.bpe, text, written beside the shards):
//   moetrain-bpe 1
//   vocab <N>
//   <left> <right>        N - 257 lines: merge i's pair (ids below 257 + i)
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mt {

class Bpe {
 public:
  static constexpr int kBytes = 256, kDocumentStart = 256, kFirstMerge = 257;

  // Learns merges until the vocabulary holds `vocab` tokens or no pair occurs twice.
  // `progress(merges_done)` is called now and then.
  static Bpe train(const std::vector<std::string_view>& documents, int vocab,
                   const std::function<void(int)>& progress = nullptr);
  static Bpe load(const std::string& path);
  // The byte tokenizer of `moetrain prepare` without --vocab: no merges.
  static Bpe byte_level() { return Bpe({}); }
  void save(const std::string& path) const;

  int vocab() const { return kFirstMerge + int(merges_.size()); }
  // Appends text's tokens to `out`.
  void encode(std::string_view text, std::vector<uint16_t>& out) const;
  std::vector<uint16_t> encode(std::string_view text) const;
  // The bytes of the tokens (a document start adds none).
  std::string decode(const std::vector<uint16_t>& ids) const;
  // Bytes each token stands for (the document start: none).
  std::vector<size_t> token_bytes() const;
  // The same tokenizer as a Hugging Face tokenizer.json (ByteLevel BPE, no regex split: a Split
  // before each space, then the byte-to-character map of GPT-2).
  std::string hf_json() const;

 private:
  explicit Bpe(std::vector<std::pair<int, int>> merges);
  void encode_chunk(std::string_view chunk, std::vector<uint16_t>& out) const;

  std::vector<std::pair<int, int>> merges_;
  std::vector<std::string> bytes_;             // [token]: its bytes
  std::unordered_map<uint64_t, int> rank_;     // pair (left << 32 | right) -> merge index
  mutable std::unordered_map<std::string, std::vector<uint16_t>> cache_;  // encoded chunks
};

// Where `moetrain prepare --vocab` puts the tokenizer of `shard` (a shard path or glob): beside it.
std::string tokenizer_beside(const std::string& shard);

// Bytes each token id below `vocab` stands for in shards written by `moetrain prepare`: the
// tokenizer.bpe beside `shard` says, or without one the byte tokenizer (1 byte; none for the
// document start and ids beyond it).
std::vector<size_t> token_bytes_of_shards(const std::string& shard, int vocab);

// Chunks of text: a new one starts before every space.
std::vector<std::string_view> bpe_chunks(std::string_view text);

}  // namespace mt
