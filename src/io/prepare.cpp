#include "io/prepare.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/shards.hpp"
#include "util/error.hpp"

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

PrepareStats prepare_byte_shards(const std::vector<std::string>& inputs, const std::string& out_dir) {
  PrepareStats st;
  std::vector<uint16_t> train, val;
  for (auto& path : expand_inputs(inputs)) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw UserError(path + ": cannot read");
    std::stringstream buf;
    buf << f.rdbuf();
    st.files++;
    for (auto& doc : split_documents(buf.str())) {
      auto& dst = (st.documents++ % 20 == 19) ? val : train;
      dst.push_back(kDocumentStart);
      for (unsigned char c : doc) dst.push_back(c);
    }
  }
  if (train.empty() || val.empty())
    throw UserError("prepare: the inputs hold " + std::to_string(st.documents) +
                    " documents; at least 20 are needed for a train and a validation shard");
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw UserError(out_dir + ": cannot create the output directory: " + ec.message());
  write_shard(out_dir + "/train_000000.bin", train);
  write_shard(out_dir + "/val_000000.bin", val);
  st.train_tokens = train.size();
  st.val_tokens = val.size();
  st.unigram_entropy = unigram_entropy(train);
  return st;
}

}  // namespace mt
