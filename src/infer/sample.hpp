#pragma once
// `moetrain sample RUN_DIR`: text from a run's newest checkpoint, one token at a time (Decoder),
// with the tokenizer the run trained on.
#include <cstdint>
#include <string>

namespace mt {

struct SampleOptions {
  std::string run_dir;
  std::string prompt;        // text the sample continues (after a document start)
  int tokens = 200;          // new tokens at most (fewer when the document ends or seq_len is reached)
  double temperature = 0.8;  // 0: always the likeliest token
  int top_k = 40;            // draw among the k likeliest (0: all)
  uint64_t seed = 0;
  std::string device;        // auto, cpu, cuda or cpu-strict; empty: the run's precision.device
};

// Prints the prompt and then each new token's text as it is drawn (stdout); what it loaded and
// its speed go to stderr. Throws UserError on a run without checkpoints or a prompt that does not fit.
void sample_text(const SampleOptions& o);

// The tokenizer of a run: <run_dir>/tokenizer.bpe (the trainer copies it there), else the one
// beside the training shards, else none (byte-level). Empty when byte-level.
std::string run_tokenizer(const std::string& run_dir, const std::string& train_shards);

}  // namespace mt
