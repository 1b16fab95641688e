#pragma once
// `moetrain prepare`: text files -> byte-level token shards. Token b (0..255) is the byte b;
// token 256 marks the start of a document. Files in the fortune(6) format (entries separated by
// lines holding only "%") are split into one document per entry; other files are one document.
// Every 20th document goes to the validation shard.
#include <string>
#include <vector>

namespace mt {

constexpr int kByteVocab = 257;
constexpr int kDocumentStart = 256;

struct PrepareStats {
  size_t files = 0, documents = 0, train_tokens = 0, val_tokens = 0;
  double unigram_entropy = 0;  // of the training tokens, nats
};

// Inputs may be files or directories (their regular files, non-recursively, skipping the
// fortune index files *.dat and symbolic links). Writes DIR/train_000000.bin, DIR/val_000000.bin.
PrepareStats prepare_byte_shards(const std::vector<std::string>& inputs, const std::string& out_dir);

}  // namespace mt
