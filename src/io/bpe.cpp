#include "io/bpe.hpp"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <queue>
#include <sstream>

#include "util/escape.hpp"
#include "util/error.hpp"

namespace mt {

namespace {

uint64_t pair_key(int left, int right) { return uint64_t(uint32_t(left)) << 32 | uint32_t(right); }

// Joins each occurrence of (left, right) in `s`, left to right, into `id`.
void merge_pair(std::vector<int>& s, int left, int right, int id) {
  size_t out = 0;
  for (size_t i = 0; i < s.size(); ++out) {
    if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) s[out] = id, i += 2;
    else s[out] = s[i], i += 1;
  }
  s.resize(out);
}

// GPT-2's map of bytes to printable characters (Hugging Face's ByteLevel): printable Latin-1
// bytes stand for themselves, the others for the code points from 256 up, in byte order.
std::vector<std::string> byte_characters() {
  std::vector<std::string> out(256);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    const int cp = printable ? b : next++;
    // UTF-8 of a code point below 2^11.
    out[size_t(b)] = cp < 0x80 ? std::string(1, char(cp))
                               : std::string{char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
  }
  return out;
}

}  // namespace

std::vector<std::string_view> bpe_chunks(std::string_view text) {
  std::vector<std::string_view> chunks;
  size_t start = 0;
  for (size_t i = 1; i < text.size(); ++i)
    if (text[i] == ' ') chunks.push_back(text.substr(start, i - start)), start = i;
  if (start < text.size()) chunks.push_back(text.substr(start));
  return chunks;
}

Bpe::Bpe(std::vector<std::pair<int, int>> merges) : merges_(std::move(merges)) {
  for (int b = 0; b < kBytes; ++b) bytes_.push_back(std::string(1, char(b)));
  bytes_.push_back("");  // the document start
  for (size_t i = 0; i < merges_.size(); ++i) {
    bytes_.push_back(bytes_[size_t(merges_[i].first)] + bytes_[size_t(merges_[i].second)]);
    rank_[pair_key(merges_[i].first, merges_[i].second)] = int(i);
  }
}

Bpe Bpe::train(const std::vector<std::string_view>& documents, int vocab, const std::function<void(int)>& progress) {
  if (vocab < kFirstMerge || vocab > 65536)
    throw UserError("--vocab " + std::to_string(vocab) + ": a BPE vocabulary holds 257 to 65536 tokens (the 256 "
                    "bytes, the document start, the merges; shards store 16-bit ids)");
  std::unordered_map<std::string_view, long> counts;
  for (std::string_view doc : documents)
    for (std::string_view chunk : bpe_chunks(doc)) ++counts[chunk];
  // The distinct chunks in a fixed order, as symbol sequences with their counts.
  std::vector<std::pair<std::string_view, long>> distinct(counts.begin(), counts.end());
  std::sort(distinct.begin(), distinct.end());
  std::vector<std::vector<int>> words;
  std::vector<long> freq;
  for (const auto& [chunk, n] : distinct) {
    words.emplace_back(chunk.begin(), chunk.end());
    for (int& s : words.back()) s = int(uint8_t(s));
    freq.push_back(n);
  }
  std::unordered_map<uint64_t, long> pairs;             // pair -> occurrences
  std::unordered_map<uint64_t, std::vector<int>> where;  // pair -> words that held it (some no longer)
  for (size_t w = 0; w < words.size(); ++w)
    for (size_t i = 0; i + 1 < words[w].size(); ++i) {
      const uint64_t k = pair_key(words[w][i], words[w][i + 1]);
      pairs[k] += freq[w];
      where[k].push_back(int(w));
    }
  // The most frequent pair first, the smaller key on a tie; stale entries are skipped.
  using Entry = std::pair<long, uint64_t>;
  auto later = [](const Entry& x, const Entry& y) {
    return x.first != y.first ? x.first < y.first : x.second > y.second;
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(later)> heap(later);
  for (const auto& [k, n] : pairs) heap.push({n, k});
  std::vector<std::pair<int, int>> merges;
  std::vector<int> seen(words.size(), -1);
  while (kFirstMerge + int(merges.size()) < vocab) {
    while (!heap.empty() && pairs[heap.top().second] != heap.top().first) heap.pop();
    if (heap.empty() || heap.top().first < 2) break;
    const uint64_t key = heap.top().second;
    const int left = int(key >> 32), right = int(key & 0xffffffffu), id = kFirstMerge + int(merges.size());
    merges.push_back({left, right});
    std::vector<uint64_t> touched;
    // where[key] itself takes no entries below (the new pairs hold `id`), and the map keeps its
    // elements in place as it grows.
    for (int w : where[key]) {
      if (seen[size_t(w)] == id) continue;
      seen[size_t(w)] = id;
      std::vector<int>& s = words[size_t(w)];
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const uint64_t k = pair_key(s[i], s[i + 1]);
        pairs[k] -= freq[size_t(w)];
        touched.push_back(k);
      }
      merge_pair(s, left, right, id);
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const uint64_t k = pair_key(s[i], s[i + 1]);
        pairs[k] += freq[size_t(w)];
        touched.push_back(k);
        if (s[i] == id || s[i + 1] == id) where[k].push_back(w);
      }
    }
    where.erase(key);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint64_t k : touched)
      if (pairs[k] > 0) heap.push({pairs[k], k});
    if (progress && merges.size() % 500 == 0) progress(int(merges.size()));
  }
  return Bpe(std::move(merges));
}

Bpe Bpe::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError(path + ": cannot read the tokenizer (written by `moetrain prepare --vocab N`)");
  std::string magic;
  int version = 0, vocab = 0;
  std::string word;
  if (!(in >> magic >> version) || magic != "moetrain-bpe" || version != 1)
    throw UserError(path + ": line 1: not a moetrain BPE tokenizer (expected \"moetrain-bpe 1\")");
  if (!(in >> word >> vocab) || word != "vocab" || vocab < kFirstMerge || vocab > 65536)
    throw UserError(path + ": line 2: expected \"vocab N\" with N in [257, 65536]");
  std::vector<std::pair<int, int>> merges;
  for (int id = kFirstMerge; id < vocab; ++id) {
    int left = -1, right = -1;
    const int line = id - kFirstMerge + 3;
    if (!(in >> left >> right))
      throw UserError(path + ": line " + std::to_string(line) + ": expected merge " + std::to_string(id - kFirstMerge) +
                      " as two token ids (the file ends early or holds something else)");
    if (left < 0 || right < 0 || left >= id || right >= id || left == kDocumentStart || right == kDocumentStart)
      throw UserError(path + ": line " + std::to_string(line) + ": merge " + std::to_string(id - kFirstMerge) + " (" +
                      std::to_string(left) + " " + std::to_string(right) +
                      ") must join two earlier tokens other than " + "the document start (ids below " +
                      std::to_string(id) + ", not 256)");
    merges.push_back({left, right});
  }
  if (in >> word) throw UserError(path + ": more merges than vocab " + std::to_string(vocab) + " holds");
  return Bpe(std::move(merges));
}

void Bpe::save(const std::string& path) const {
  std::ofstream out(path);
  out << "moetrain-bpe 1\nvocab " << vocab() << "\n";
  for (const auto& [left, right] : merges_) out << left << " " << right << "\n";
  if (!out.flush()) throw UserError(path + ": cannot write the tokenizer");
}

void Bpe::encode_chunk(std::string_view chunk, std::vector<uint16_t>& out) const {
  const std::string key(chunk);
  if (auto it = cache_.find(key); it != cache_.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  std::vector<int> s(chunk.begin(), chunk.end());
  for (int& b : s) b = int(uint8_t(b));
  while (s.size() >= 2) {
    int best = INT_MAX;
    for (size_t i = 0; i + 1 < s.size(); ++i)
      if (auto it = rank_.find(pair_key(s[i], s[i + 1])); it != rank_.end()) best = std::min(best, it->second);
    if (best == INT_MAX) break;
    merge_pair(s, merges_[size_t(best)].first, merges_[size_t(best)].second, kFirstMerge + best);
  }
  std::vector<uint16_t>& ids = cache_[key];
  ids.assign(s.begin(), s.end());
  out.insert(out.end(), ids.begin(), ids.end());
}

void Bpe::encode(std::string_view text, std::vector<uint16_t>& out) const {
  for (std::string_view chunk : bpe_chunks(text)) encode_chunk(chunk, out);
}

std::vector<uint16_t> Bpe::encode(std::string_view text) const {
  std::vector<uint16_t> out;
  encode(text, out);
  return out;
}

std::string Bpe::decode(const std::vector<uint16_t>& ids) const {
  std::string out;
  for (uint16_t id : ids) {
    if (id >= bytes_.size())
      throw UserError("token id " + std::to_string(id) + " is beyond the tokenizer's vocabulary of " +
                      std::to_string(bytes_.size()));
    out += bytes_[id];
  }
  return out;
}

std::vector<size_t> Bpe::token_bytes() const {
  std::vector<size_t> n;
  for (const std::string& b : bytes_) n.push_back(b.size());
  return n;
}

std::string tokenizer_beside(const std::string& shard) {
  return std::filesystem::path(shard).parent_path() / "tokenizer.bpe";
}

std::vector<size_t> token_bytes_of_shards(const std::string& shard, int vocab) {
  const std::string tokenizer = tokenizer_beside(shard);
  std::vector<size_t> n;
  if (std::filesystem::exists(tokenizer)) n = Bpe::load(tokenizer).token_bytes();
  for (size_t id = n.size(); id < size_t(vocab); ++id) n.push_back(id < size_t(Bpe::kBytes) ? 1 : 0);
  return n;
}

std::string Bpe::hf_json() const {
  const std::vector<std::string> chars = byte_characters();
  std::vector<std::string> text(bytes_.size());
  for (size_t id = 0; id < bytes_.size(); ++id)
    for (unsigned char b : bytes_[id]) text[id] += chars[b];
  text[kDocumentStart] = "<|document|>";
  std::ostringstream o;
  o << "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[{\"id\":" << kDocumentStart
    << ",\"content\":\"<|document|>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,"
       "\"special\":true}],\"normalizer\":null,"
       "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
       "{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"MergedWithNext\",\"invert\":false},"
       "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]},"
       "\"post_processor\":null,"
       "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false},"
       "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":null,"
       "\"end_of_word_suffix\":null,\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":false,\"vocab\":{";
  for (size_t id = 0; id < text.size(); ++id) o << (id ? "," : "") << json_string(text[id]) << ":" << id;
  o << "},\"merges\":[";
  for (size_t i = 0; i < merges_.size(); ++i)
    o << (i ? "," : "") << "[" << json_string(text[size_t(merges_[i].first)]) << ","
      << json_string(text[size_t(merges_[i].second)]) << "]";
  o << "]}}\n";
  return o.str();
}

}  // namespace mt
