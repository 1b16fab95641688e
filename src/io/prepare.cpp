#include "io/prepare.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>

#include <unistd.h>

#include "io/bpe.hpp"
#include "io/shards.hpp"
#include "util/error.hpp"
#include "util/read_file.hpp"

namespace fs = std::filesystem;

namespace mt {

namespace {

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (auto& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> dir;
      for (auto& e : fs::directory_iterator(in)) {
        if (e.is_symlink() || !e.is_regular_file() || e.path().extension() == ".dat") continue;
        dir.push_back(e.path().string());
      }
      std::sort(dir.begin(), dir.end());
      if (dir.empty()) throw UserError(in + ": directory has no text files to tokenize");
      files.insert(files.end(), dir.begin(), dir.end());
    } else if (fs::is_regular_file(in, ec)) {
      files.push_back(in);
    } else {
      throw UserError(in + ": no such file or directory (--input takes text files or directories; "
                      "the demo corpus is /usr/share/games/fortunes from the 'fortunes' package)");
    }
  }
  return files;
}

std::vector<std::string> split_documents(const std::string& text) {
  std::vector<std::string> docs;
  std::istringstream in(text);
  std::string line, doc;
  bool fortune_format = false;
  while (std::getline(in, line)) {
    if (line == "%") {
      fortune_format = true;
      if (!doc.empty()) docs.push_back(doc);
      doc.clear();
    } else {
      doc += line + "\n";
    }
  }
  if (!doc.empty()) docs.push_back(doc);
  if (!fortune_format) return {text};
  return docs;
}

}  // namespace

PrepareStats prepare_shards(const std::vector<std::string>& inputs, const std::string& out_dir, int vocab) {
  PrepareStats st;
  std::vector<std::string> docs;
  for (auto& path : expand_inputs(inputs)) {
    st.files++;
    for (auto& doc : split_documents(read_file(path))) st.bytes += doc.size(), docs.push_back(std::move(doc));
  }
  st.documents = docs.size();
  auto validation = [](size_t doc) { return doc % 20 == 19; };
  if (docs.size() < 20)
    throw UserError("prepare: the inputs hold " + std::to_string(docs.size()) +
                    " documents; at least 20 are needed for a train and a validation shard");
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw UserError(out_dir + ": cannot create the output directory: " + ec.message());
  std::optional<Bpe> bpe;
  if (vocab > 0) {
    std::vector<std::string_view> learn;
    for (size_t d = 0; d < docs.size(); ++d)
      if (!validation(d)) learn.push_back(docs[d]);
    const auto start = std::chrono::steady_clock::now();
    // Progress on a terminal only, one line rewritten in place.
    const bool tty = isatty(fileno(stderr));
    bpe = Bpe::train(learn, vocab, [&](int merges) {
      if (tty) std::fprintf(stderr, "\rprepare: %d of %d merges learned", merges, vocab - Bpe::kFirstMerge);
    });
    if (tty) std::fprintf(stderr, "\n");
    st.train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    st.vocab = bpe->vocab();
    bpe->save(out_dir + "/tokenizer.bpe");
    std::ofstream(out_dir + "/tokenizer.json") << bpe->hf_json();
  }
  std::vector<uint16_t> train, val;
  const auto start = std::chrono::steady_clock::now();
  for (size_t d = 0; d < docs.size(); ++d) {
    auto& dst = validation(d) ? val : train;
    dst.push_back(kDocumentStart);
    if (bpe) bpe->encode(docs[d], dst);
    else for (unsigned char c : docs[d]) dst.push_back(c);
  }
  st.encode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_shard(out_dir + "/train_000000.bin", train);
  write_shard(out_dir + "/val_000000.bin", val);
  st.train_tokens = train.size();
  st.val_tokens = val.size();
  st.unigram_entropy = unigram_entropy(train);
  return st;
}

}  // namespace mt
