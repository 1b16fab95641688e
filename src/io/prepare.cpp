#include "io/prepare.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>

#include <unistd.h>

#include "io/bpe.hpp"
#include "io/shards.hpp"
#include "util/error.hpp"
#include "util/read_file.hpp"

namespace fs = std::filesystem;

namespace mt {

namespace {

// The files of one input, sorted when it is a directory.
std::vector<std::string> files_of(const std::string& in) {
  std::error_code ec;
  if (fs::is_directory(in, ec)) {
    std::vector<std::string> dir;
    for (auto& e : fs::directory_iterator(in)) {
      if (e.is_symlink() || !e.is_regular_file() || e.path().extension() == ".dat") continue;
      dir.push_back(e.path().string());
    }
    std::sort(dir.begin(), dir.end());
    if (dir.empty()) throw UserError(in + ": directory has no text files to tokenize");
    return dir;
  }
  if (fs::is_regular_file(in, ec)) return {in};
  throw UserError(in + ": no such file or directory (--input takes text files or directories; "
                  "the demo corpus is /usr/share/games/fortunes from the 'fortunes' package)");
}

// Fewer than 20 documents: what each input gave, and a piece size that gives 20.
std::string too_few(const PrepareStats& st, size_t text_bytes) {
  std::string msg = "prepare: ";
  for (size_t i = 0; i < st.inputs.size(); ++i) msg += (i ? "; " : "") + describe(st.inputs[i]);
  if (st.inputs.size() > 1) msg += "; " + std::to_string(st.documents) + " documents in all";
  msg += "; at least 20 are needed, as every 20th document goes to the validation shard: ";
  const size_t piece = text_bytes / 20;
  if (piece < kMinPieceBytes)
    return msg + "the text holds " + std::to_string(text_bytes) + " bytes, too few for 20 documents of " +
           std::to_string(kMinPieceBytes) + " bytes; give at least " + std::to_string(20 * kMinPieceBytes) +
           " bytes of text";
  return msg + "try --split bytes --piece-bytes " + std::to_string(piece) + " (pieces of at most 1/20 of the " +
         std::to_string(text_bytes) + " bytes of text), or add text";
}

}  // namespace

std::string describe(const InputReport& r) {
  std::string s = r.path + ": ";
  if (r.files != 1) s += std::to_string(r.files) + " files, ";
  s += std::to_string(r.documents) + (r.documents == 1 ? " document (" : " documents (");
  if (r.files == 1 && r.empty_files == 1) return s + "empty)";
  bool first = true;
  for (auto& [how, files] : r.splits) {
    s += first ? "" : ", ";
    s += r.splits.size() == 1 && r.empty_files == 0 ? how : std::to_string(files) + " " + how;
    first = false;
  }
  if (r.empty_files) s += (first ? "" : ", ") + std::to_string(r.empty_files) + " empty";
  if (r.crlf_files) s += r.files == 1 ? "; CRLF line ends read as LF" : "; CRLF line ends read as LF in " +
                                                                            std::to_string(r.crlf_files);
  return s + ")";
}

std::string train_command(const std::string& out, int bpe_vocab) {
  std::string out_dir = out;
  while (out_dir.size() > 1 && out_dir.back() == '/') out_dir.pop_back();
  const std::string name = fs::path(out_dir).filename().string();
  const bool plain = !name.empty() && name != "." && name != ".." &&
                     name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
                         std::string::npos;
  std::string cmd = "moetrain train EXP.toml";
  if (plain) cmd += " --set run.name=" + name;
  cmd += " --set data.train='" + out_dir + "/train_*.bin' --set data.val='" + out_dir + "/val_*.bin'";
  if (bpe_vocab > 0) cmd += " --set model.vocab_size=" + std::to_string(bpe_vocab);
  return cmd;
}

PrepareStats prepare_shards(const std::vector<std::string>& inputs, const std::string& out_dir, int vocab,
                            const SplitOptions& split) {
  PrepareStats st;
  std::vector<std::string> docs;
  size_t text_bytes = 0;
  for (auto& in : inputs) {
    InputReport r;
    r.path = in;
    for (auto& path : files_of(in)) {
      const std::string text = read_file(path);
      check_text(path, text);
      FileDocuments f = split_documents(text, split);
      r.files++;
      text_bytes += f.bytes;
      r.documents += f.docs.size();
      r.crlf_files += f.crlf;
      if (f.docs.empty()) r.empty_files++;
      else r.splits[split_description(f.used, split)]++;
      for (auto& doc : f.docs) st.bytes += doc.size(), docs.push_back(std::move(doc));
    }
    st.files += r.files;
    st.inputs.push_back(std::move(r));
  }
  st.documents = docs.size();
  auto validation = [](size_t doc) { return doc % 20 == 19; };
  if (docs.size() < 20) throw UserError(too_few(st, text_bytes));
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
