#pragma once
// `moetrain prepare`: text files -> token shards, byte-level or byte-level BPE (io/bpe.hpp).
// Token b (0..255) is the byte b; token 256 marks the start of a document; with a vocabulary of N
// tokens, tokens 257..N-1 are BPE merges learned from the training documents. Files in the
// fortune(6) format (entries separated by lines holding only "%") are split into one document per
// entry; other files are one document. Every 20th document goes to the validation shard.
#include <string>
#include <vector>

namespace mt {

constexpr int kByteVocab = 257;
constexpr int kDocumentStart = 256;

struct PrepareStats {
  size_t files = 0, documents = 0, train_tokens = 0, val_tokens = 0;
  size_t bytes = 0;            // of the documents' text
  int vocab = kByteVocab;      // tokens in the vocabulary (fewer than asked when no pair repeats)
  double unigram_entropy = 0;  // of the training tokens, nats
  double train_seconds = 0, encode_seconds = 0;  // BPE: learning the merges; encoding every document
};

// Inputs may be files or directories (their regular files, non-recursively, skipping the
// fortune index files *.dat and symbolic links). Writes DIR/train_000000.bin, DIR/val_000000.bin;
// with vocab > 0 (BPE), also DIR/tokenizer.bpe and DIR/tokenizer.json (Hugging Face).
PrepareStats prepare_shards(const std::vector<std::string>& inputs, const std::string& out_dir, int vocab = 0);

}  // namespace mt
