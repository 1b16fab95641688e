// `moetrain prepare`: text files into token shards, bytes or a byte-level BPE learned from them.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/command.hpp"
#include "io/bpe.hpp"
#include "io/prepare.hpp"
#include "util/cli_checks.hpp"

namespace mt::cli {

namespace {

struct PrepareArgs {
  std::vector<std::string> inputs;
  std::string out;
  int vocab = 0;
  std::string split, separator;
  size_t piece_bytes = 0;
  CLI::Option* separator_opt = nullptr;
  CLI::Option* piece_opt = nullptr;
};

int run_prepare(const std::vector<std::string>& inputs, const std::string& out, int vocab,
                const mt::SplitOptions& split) {
  const mt::PrepareStats st = mt::prepare_shards(inputs, out, vocab, split);
  for (const mt::InputReport& r : st.inputs) std::printf("prepare: %s\n", mt::describe(r).c_str());
  std::printf("prepare: %zu %s, %zu documents -> %s/train_000000.bin (%zu tokens), %s/val_000000.bin (%zu tokens)\n",
              st.files, st.files == 1 ? "file" : "files", st.documents, out.c_str(), st.train_tokens, out.c_str(),
              st.val_tokens);
  const double tokens = double(st.train_tokens + st.val_tokens - st.documents);  // without the document starts
  if (vocab > 0) {
    std::printf("prepare: BPE vocabulary of %d tokens%s, learned in %.1f s -> %s/tokenizer.bpe, %s/tokenizer.json\n",
                st.vocab, st.vocab < vocab ? " (no pair repeats beyond it)" : "", st.train_seconds, out.c_str(),
                out.c_str());
    std::printf("prepare: encoded %.1f MB in %.2f s (%.1f MB/s), %.3f bytes per token; set model.vocab_size = %d\n",
                double(st.bytes) / 1e6, st.encode_seconds, double(st.bytes) / 1e6 / std::max(st.encode_seconds, 1e-9),
                double(st.bytes) / tokens, st.vocab);
  } else {
    std::printf("prepare: byte-level vocabulary of %d tokens\n", mt::kByteVocab);
  }
  std::printf("prepare: unigram entropy of the training tokens %.4f nats\n", st.unigram_entropy);
  std::printf("prepare: train on them: %s\n", mt::train_command(out, vocab > 0 ? st.vocab : 0).c_str());
  return 0;
}

}  // namespace

Command add_prepare(CLI::App& app) {
  auto a = std::make_shared<PrepareArgs>();
  CLI::App* prepare =
      app.add_subcommand("prepare", "Tokenize text files into token shards (bytes, or byte-level BPE)");
  prepare->add_option("--input", a->inputs, "text files or directories (repeatable)")->required();
  prepare->add_option("--out", a->out, "output directory for train_000000.bin and val_000000.bin")->required();
  prepare->add_option("--vocab", a->vocab,
                      "learn a byte-level BPE of this many tokens (257..65536) from the training documents and "
                      "encode with it (writes tokenizer.bpe and tokenizer.json beside the shards); 0 = bytes")
      ->check(CLI::Range(0, 65536));
  prepare->add_option("--split", a->split,
                      "how each file is cut into documents: auto (the default: a file with lines holding only "
                      "\"%\" at those lines, as fortune files are, any other at blank lines), paragraphs (at "
                      "blank lines), separator (at lines holding only --separator), bytes (pieces of at most "
                      "--piece-bytes, cut at a line break or a space), file (one document per file)");
  a->separator_opt = prepare->add_option(
      "--separator", a->separator, "with --split separator: the line between documents (default \"%\")");
  a->piece_opt = prepare->add_option(
      "--piece-bytes", a->piece_bytes,
      "with --split bytes: the most bytes in a document (default " + std::to_string(mt::kDefaultPieceBytes) + ")")
      ->check(mt::whole_in(mt::kMinPieceBytes, 1LL << 40));
  return {prepare, [a] {
            return run_prepare(a->inputs, a->out, a->vocab,
                               mt::split_options(a->split, a->separator_opt->count() ? &a->separator : nullptr,
                                                 a->piece_opt->count() ? &a->piece_bytes : nullptr));
          }};
}

}  // namespace mt::cli
