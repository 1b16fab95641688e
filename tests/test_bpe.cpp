// Byte-level BPE (io/bpe.hpp): chunks, learning, encoding by rank, the file format.
#include <doctest/doctest.h>

#include <fstream>

#include "io/bpe.hpp"
#include "test_helpers.hpp"
#include "util/error.hpp"

using testing::contains;
constexpr auto error_of = testing::user_error_of;

TEST_CASE("text is cut into chunks before every space") {
  using V = std::vector<std::string_view>;
  CHECK(mt::bpe_chunks("the cat  sat\nhere") == V{"the", " cat", " ", " sat\nhere"});
  CHECK(mt::bpe_chunks(" x") == V{" x"});
  CHECK(mt::bpe_chunks("").empty());
}

TEST_CASE("learning merges the most frequent pair first, ties to the smaller ids") {
  // "aaabdaaabac": (a,a) occurs 4 times -> 257, leaving [257 a b d 257 a b a c]; there (257,a)
  // and (a,b) both occur twice, and (a,b) has the smaller ids -> 258; then (257,258) -> 259.
  const mt::Bpe bpe = mt::Bpe::train({"aaabdaaabac"}, 257 + 3);
  const std::string dir = testing::temp_dir("bpe_learn");
  bpe.save(dir + "/t.bpe");
  std::ifstream in(dir + "/t.bpe");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "moetrain-bpe 1\nvocab 260\n97 97\n97 98\n257 258\n");
  CHECK(bpe.encode("aaab") == std::vector<uint16_t>{259});
  // Documents in any order learn the same merges.
  const mt::Bpe again = mt::Bpe::train({"b a b", "a b a", "b a b"}, 262);
  const mt::Bpe swapped = mt::Bpe::train({"b a b", "b a b", "a b a"}, 262);
  CHECK(again.encode("b a b a") == swapped.encode("b a b a"));
  CHECK(contains(error_of([] { mt::Bpe::train({"x"}, 100); }), "a BPE vocabulary holds 257 to 65536 tokens"));
  // No pair occurs twice: fewer tokens than asked.
  CHECK(mt::Bpe::train({"abc"}, 300).vocab() == 257);
}

TEST_CASE("encoding applies merges by rank within chunks, and decoding gives the bytes back") {
  std::vector<std::string> docs;
  for (int i = 0; i < 50; ++i) docs.push_back("the theory of the thermal theme, then there " + std::to_string(i % 7));
  const mt::Bpe bpe = mt::Bpe::train(std::vector<std::string_view>(docs.begin(), docs.end()), 270);
  CHECK(bpe.vocab() == 270);
  const std::string text = "the  theme\n\tthere\x01\xff\x80 " + std::string("\0zero", 5);
  const std::vector<uint16_t> ids = bpe.encode(text);
  CHECK(ids.size() < text.size());
  CHECK(bpe.decode(ids) == text);
  // A chunk boundary is never crossed: text encodes as its chunks do one by one.
  std::vector<uint16_t> pieces;
  for (std::string_view chunk : mt::bpe_chunks(text)) bpe.encode(chunk, pieces);
  CHECK(pieces == ids);
  CHECK(bpe.encode("the theme").size() == bpe.encode("the").size() + bpe.encode(" theme").size());
  CHECK(bpe.decode({mt::Bpe::kDocumentStart}).empty());
  CHECK(contains(error_of([&] { bpe.decode({270}); }), "token id 270 is beyond the tokenizer's vocabulary of 270"));
}

TEST_CASE("a tokenizer saved and loaded encodes the same; damaged files name their line") {
  const mt::Bpe bpe = mt::Bpe::train({"low lower lowest low low", "newer newest new new"}, 280);
  const std::string dir = testing::temp_dir("bpe_file");
  bpe.save(dir + "/t.bpe");
  const mt::Bpe loaded = mt::Bpe::load(dir + "/t.bpe");
  CHECK(loaded.vocab() == bpe.vocab());
  CHECK(loaded.encode("lowest newer") == bpe.encode("lowest newer"));
  auto write = [&](const std::string& text) {
    std::ofstream(dir + "/bad.bpe") << text;
    return error_of([&] { mt::Bpe::load(dir + "/bad.bpe"); });
  };
  CHECK(contains(write("gpt2 1\n"), "bad.bpe: line 1: not a moetrain BPE tokenizer"));
  CHECK(contains(write("moetrain-bpe 1\nvocab 2\n"), "line 2: expected \"vocab N\" with N in [257, 65536]"));
  CHECK(contains(write("moetrain-bpe 1\nvocab 258\n97 256\n"), "line 3: merge 0 (97 256) must join two earlier tokens"));
  CHECK(contains(write("moetrain-bpe 1\nvocab 258\n97 98\n1 2\n"), "more merges than vocab 258 holds"));
  CHECK(contains(error_of([&] { mt::Bpe::load(dir + "/none.bpe"); }), "none.bpe: cannot read the tokenizer"));
}

TEST_CASE("the Hugging Face export maps bytes as GPT-2 does and lists the merges by rank") {
  const mt::Bpe bpe = mt::Bpe::train({"a a a a"}, 258);
  const std::string json = bpe.hf_json();
  // ' ' is byte 32, which GPT-2's map sends to U+0120 (the 33rd unprintable byte: 256 + 32).
  CHECK(contains(json, "\"merges\":[[\"\xc4\xa0\",\"a\"]]"));
  CHECK(contains(json, "\"\xc4\xa0" "a\":257"));
  CHECK(contains(json, "\"<|document|>\":256"));
  CHECK(contains(json, "\"use_regex\":false"));
}
