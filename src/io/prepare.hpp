#pragma once
// `moetrain prepare`: text files -> token shards, byte-level or byte-level BPE (io/bpe.hpp).
// Token b (0..255) is the byte b; token 256 marks the start of a document; with a vocabulary of N
// tokens, tokens 257..N-1 are BPE merges learned from the training documents. Each file is cut
// into documents as io/prepare_split.hpp describes (by default fortune(6) files at their "%" lines,
// other files at blank lines). Every 20th document goes to the validation shard.
#include <map>
#include <string>
#include <vector>

#include "io/prepare_split.hpp"

namespace mt {

constexpr int kByteVocab = 257;
constexpr int kDocumentStart = 256;

// What one --input (a file or a directory) gave.
struct InputReport {
  std::string path;
  size_t files = 0, documents = 0, empty_files = 0, crlf_files = 0;
  std::map<std::string, size_t> splits;  // split_description -> files cut that way
};

// "my.txt: 412 documents (split at blank lines)", "fortunes: 43 files, 15217 documents (...)".
std::string describe(const InputReport& r);

// The command that trains an experiment on out_dir's shards: "moetrain train EXP.toml --set
// run.name=NAME --set data.train='OUT/train_*.bin' ...", the run named after the directory when that
// name needs no shell quoting, and with bpe_vocab > 0 the vocabulary size.
std::string train_command(const std::string& out_dir, int bpe_vocab);

struct PrepareStats {
  std::vector<InputReport> inputs;
  size_t files = 0, documents = 0, train_tokens = 0, val_tokens = 0;
  size_t bytes = 0;            // of the documents' text
  int vocab = kByteVocab;      // tokens in the vocabulary (fewer than asked when no pair repeats)
  double unigram_entropy = 0;  // of the training tokens, nats
  double train_seconds = 0, encode_seconds = 0;  // BPE: learning the merges; encoding every document
};

// At least 20 documents are needed; fewer are refused naming what each input gave and a piece
// size that would give enough. Inputs may be files or directories (their regular files,
// non-recursively, skipping the fortune index files *.dat and symbolic links). Writes
// DIR/train_000000.bin, DIR/val_000000.bin; with vocab > 0 (BPE), also DIR/tokenizer.bpe and
// DIR/tokenizer.json (Hugging Face).
PrepareStats prepare_shards(const std::vector<std::string>& inputs, const std::string& out_dir, int vocab = 0,
                            const SplitOptions& split = {});

}  // namespace mt
