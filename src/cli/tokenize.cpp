// `moetrain tokenize`: each file's ids as one line ("PATH<TAB>ids"), or with --round-trip a check that
// decoding gives every file back byte for byte.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/command.hpp"
#include "io/bpe.hpp"
#include "util/error.hpp"
#include "util/read_file.hpp"

namespace mt::cli {

namespace {

struct TokenizeArgs {
  std::string tokenizer;
  std::vector<std::string> files;
  bool round_trip = false;
};

int run_tokenize(const std::string& tokenizer, const std::vector<std::string>& files, bool round_trip) {
  const mt::Bpe bpe = mt::Bpe::load(tokenizer);
  size_t bytes = 0;
  for (const std::string& path : files) {
    const std::string text = mt::read_file(path);
    const std::vector<uint16_t> ids = bpe.encode(text);
    bytes += text.size();
    if (round_trip) {
      const std::string back = bpe.decode(ids);
      if (back != text) {
        const size_t at =
            size_t(std::mismatch(text.begin(), text.end(), back.begin(), back.end()).first - text.begin());
        throw mt::UserError(path + ": byte " + std::to_string(at) + ": decoding its " + std::to_string(ids.size()) +
                            " tokens does not give the file back");
      }
      continue;
    }
    std::string line = path + "\t";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) line += ' ';
      line += std::to_string(ids[i]);
    }
    std::printf("%s\n", line.c_str());
  }
  if (round_trip)
    std::printf("tokenize: %zu files, %zu bytes: decode(encode(file)) is the file for every one\n", files.size(),
                bytes);
  return 0;
}

}  // namespace

Command add_tokenize(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  CLI::App* tokenize =
      app.add_subcommand("tokenize", "Encode text files with a BPE tokenizer (prepare --vocab): ids per file");
  tokenize->add_option("--tokenizer", a->tokenizer, "tokenizer.bpe written by `moetrain prepare --vocab N`")
      ->required();
  tokenize->add_option("files", a->files, "text files, each encoded whole")->required();
  tokenize->add_flag("--round-trip", a->round_trip,
                     "check that decoding gives every file back byte for byte instead of printing ids");
  return {tokenize, [a] { return run_tokenize(a->tokenizer, a->files, a->round_trip); }};
}

}  // namespace mt::cli
