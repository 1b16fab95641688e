// Token shards (llm.c format), `moetrain prepare` and the batch order.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <cmath>
#include <cstdio>

#include "io/prepare.hpp"
#include "io/shards.hpp"
#include "test_helpers.hpp"
#include "train/batches.hpp"
#include "util/error.hpp"

using testing::contains;
constexpr auto error_of = testing::user_error_of;

TEST_CASE("a shard round-trips and has llm.c's header") {
  const std::string dir = testing::temp_dir("shard");
  std::vector<uint16_t> tokens{5, 0, 65535, 7};
  mt::write_shard(dir + "/a.bin", tokens);
  CHECK(mt::read_shard(dir + "/a.bin") == tokens);
  std::ifstream in(dir + "/a.bin", std::ios::binary);
  int32_t header[256];
  in.read(reinterpret_cast<char*>(header), sizeof header);
  CHECK(header[0] == 20240520);
  CHECK(header[1] == 1);
  CHECK(header[2] == 4);
  CHECK(std::filesystem::file_size(dir + "/a.bin") == 1024 + 8);
}

TEST_CASE("bad shards are rejected with the file name and the problem") {
  const std::string dir = testing::temp_dir("badshard");
  mt::write_shard(dir + "/ok.bin", {1, 2, 3});
  std::filesystem::resize_file(dir + "/ok.bin", 1024 + 4);
  CHECK(contains(error_of([&] { mt::read_shard(dir + "/ok.bin"); }), "header says 3 tokens"));
  { std::ofstream(dir + "/text.bin") << std::string(2000, 'x'); }
  CHECK(contains(error_of([&] { mt::read_shard(dir + "/text.bin"); }), "text.bin: byte 0: magic number"));
  { std::ofstream(dir + "/short.bin") << "abc"; }
  CHECK(contains(error_of([&] { mt::read_shard(dir + "/short.bin"); }), "shorter than the 1024-byte shard header"));
}

TEST_CASE("a missing data file names the config key and says how to make data") {
  const std::string e = error_of([] { mt::TokenStream("no/such/train_*.bin", "exp.toml:3:9: data.train", 257); });
  CHECK(contains(e, "exp.toml:3:9: data.train = \"no/such/train_*.bin\": no shard matches"));
  CHECK(contains(e, "moetrain prepare"));
}

TEST_CASE("tokens outside the vocabulary are rejected") {
  const std::string dir = testing::temp_dir("vocab");
  mt::write_shard(dir + "/train_000000.bin", {1, 2, 300});
  const std::string e = error_of([&] { mt::TokenStream(dir + "/train_*.bin", "data.train", 257); });
  CHECK(contains(e, "train_000000.bin: byte 1028: token 300 at position 2 is outside model.vocab_size = 257"));
}

// Many shards read as one stream: every position, windows across shard boundaries included,
// against the shards' tokens concatenated.
TEST_CASE("a stream of many shards reads as their concatenation") {
  const std::string dir = testing::temp_dir("many");
  std::vector<uint16_t> all;
  for (int s = 0; s < 40; ++s) {
    std::vector<uint16_t> t(size_t(1 + (s * 7) % 13));
    for (size_t i = 0; i < t.size(); ++i) t[i] = uint16_t((s * 31 + int(i) * 7) % 257);
    char name[64];
    std::snprintf(name, sizeof name, "/train_%06d.bin", s);
    mt::write_shard(dir + name, t);
    all.insert(all.end(), t.begin(), t.end());
  }
  const mt::TokenStream stream(dir + "/train_*.bin", "data.train", 257);
  REQUIRE(stream.size() == all.size());
  for (size_t i = 0; i < all.size(); ++i) REQUIRE(stream[i] == all[i]);
  for (size_t i = all.size(); i-- > 0;) REQUIRE(stream[i] == all[i]);  // backwards too
  CHECK(stream.unigram_entropy() == doctest::Approx(mt::unigram_entropy(all)).epsilon(1e-12));
}

// A shard past 4 GiB's int32 byte offsets (2^31 tokens are 4 GiB; this one holds 1.2e9 tokens,
// 2.4 GB): made sparse, so it costs no disk, with a token written at its very end.
TEST_CASE("a shard over 2 GiB reads to its last token") {
  const std::string dir = testing::temp_dir("big");
  const std::string path = dir + "/train_000000.bin";
  const size_t n = 1200000000;
  {
    int32_t header[256] = {};
    header[0] = mt::kShardMagic;
    header[1] = mt::kShardVersion;
    header[2] = int32_t(n);
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(header), sizeof header);
    f.seekp(std::streamoff(1024 + 2 * (n - 1)));
    const uint16_t last = 7;
    f.write(reinterpret_cast<const char*>(&last), 2);
  }
  REQUIRE(std::filesystem::file_size(path) == 1024 + 2 * n);
  const mt::TokenStream stream(path, "data.train", 257);
  CHECK(stream.size() == n);
  CHECK(stream[n - 1] == 7);
  CHECK(stream[n - 2] == 0);
  std::filesystem::remove(path);
}

TEST_CASE("prepare splits fortune files into documents, byte tokens after a document-start token") {
  const std::string dir = testing::temp_dir("prepare");
  {
    std::ofstream f(dir + "/quotes");
    for (int i = 0; i < 40; ++i) f << "quote " << i << "\n%\n";
  }
  { std::ofstream(dir + "/quotes.dat") << "index file, skipped"; }
  mt::PrepareStats st = mt::prepare_shards({dir}, dir + "/out");
  CHECK(st.files == 1);
  CHECK(st.documents == 40);
  CHECK(st.val_tokens > 0);
  std::vector<uint16_t> train = mt::read_shard(dir + "/out/train_000000.bin");
  CHECK(train.size() == st.train_tokens);
  REQUIRE(train.size() > 10);
  CHECK(train[0] == mt::kDocumentStart);
  CHECK(std::string(train.begin() + 1, train.begin() + 9) == "quote 0\n");
  CHECK(st.unigram_entropy > 0);
  CHECK(contains(error_of([&] { mt::prepare_shards({dir + "/missing"}, dir + "/o2"); }), "no such file or directory"));
}

TEST_CASE("unigram entropy of a known distribution") {
  CHECK(mt::unigram_entropy({1, 1, 2, 2}) == doctest::Approx(std::log(2.0)));
  CHECK(mt::unigram_entropy({7, 7, 7}) == doctest::Approx(0.0));
}

TEST_CASE("batches: sequence i is window i of the stream, targets are inputs shifted by one") {
  const std::string dir = testing::temp_dir("batches");
  std::vector<uint16_t> tokens(23);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint16_t(i);
  mt::write_shard(dir + "/t.bin", tokens);
  mt::TokenStream stream(dir + "/t.bin", "data.train", 100);
  mt::Batches b(stream, 5, "data.train");
  std::vector<int> in, tg;
  b.fill(1, 2, in, tg);
  CHECK(in == std::vector<int>{5, 6, 7, 8, 9, 10, 11, 12, 13, 14});
  CHECK(tg == std::vector<int>{6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  b.fill(4, 1, in, tg);  // 4 whole windows fit 23 tokens: sequence 4 wraps to window 0
  CHECK(in == std::vector<int>{0, 1, 2, 3, 4});
}
