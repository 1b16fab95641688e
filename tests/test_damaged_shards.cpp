// Token shards that are not what their header says, or that change on disk while a run reads them.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include "io/shards.hpp"
#include "test_helpers.hpp"
#include "train/batches.hpp"
#include "util/error.hpp"

using testing::contains;
constexpr auto error_of = testing::user_error_of;

namespace {

// A shard of `tokens` ids 0, 1, 2, ... whose header int `field` is then set to `value`.
std::string shard_with(const std::string& dir, const std::string& name, size_t tokens, int field, int32_t value) {
  std::vector<uint16_t> ids(tokens);
  for (size_t i = 0; i < tokens; ++i) ids[i] = uint16_t(i % 200);
  const std::string path = dir + "/" + name;
  mt::write_shard(path, ids);
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(4 * field);
  f.write(reinterpret_cast<const char*>(&value), sizeof value);
  return path;
}

std::string stream_error(const std::string& path) {
  return error_of([&] { mt::TokenStream(path, "data.train", 257); });
}

}  // namespace

TEST_CASE("every shard header field is used exactly or refused, naming the byte") {
  const std::string dir = testing::temp_dir("shard_header");
  CHECK(contains(stream_error(shard_with(dir, "llama3.bin", 10, 0, 20240801)),
                 "llama3.bin: byte 0: magic number 20240801: llm.c's Llama 3 format, uint32 tokens"));
  CHECK(contains(stream_error(shard_with(dir, "magic.bin", 10, 0, 7)), "magic.bin: byte 0: magic number 7"));
  CHECK(contains(stream_error(shard_with(dir, "version.bin", 10, 1, 2)),
                 "version.bin: byte 4: shard version 2, expected 1 (uint16 tokens)"));
  CHECK(contains(stream_error(shard_with(dir, "negative.bin", 10, 2, -1)), "negative.bin: byte 8: negative token"));
  CHECK(contains(stream_error(shard_with(dir, "more.bin", 10, 2, 11)),
                 "more.bin: header says 11 tokens, so the file should be 1046 bytes, but it is 1044"));
  CHECK(contains(stream_error(shard_with(dir, "fewer.bin", 10, 2, 9)),
                 "fewer.bin: header says 9 tokens, so the file should be 1042 bytes, but it is 1044"));
  CHECK(contains(stream_error(shard_with(dir, "int3.bin", 10, 3, 50257)),
                 "int3.bin: byte 12: header int 3 is 50257, expected 0"));
  CHECK(contains(stream_error(shard_with(dir, "int255.bin", 10, 255, 1)),
                 "int255.bin: byte 1020: header int 255 is 1, expected 0"));
  CHECK(contains(error_of([&] { mt::read_shard(dir + "/int3.bin"); }), "byte 12: header int 3"));
  // The vocabulary is the config's: an id at or past it is refused, one below it read.
  const std::string ids = shard_with(dir, "ids.bin", 10, 3, 0);
  CHECK(contains(error_of([&] { mt::TokenStream(ids, "data.train", 9); }),
                 "ids.bin: byte 1042: token 9 at position 9 is outside model.vocab_size = 9"));
  CHECK(mt::TokenStream(ids, "data.train", 10).size() == 10);
}

TEST_CASE("a shard cut short after the run opened it is named before a window past its end is read") {
  const std::string dir = testing::temp_dir("shard_cut");
  const std::string first = shard_with(dir, "train_000000.bin", 5000, 3, 0);
  const std::string second = shard_with(dir, "train_000001.bin", 5000, 3, 0);
  const mt::TokenStream stream(dir + "/train_*.bin", "data.train", 257);
  const mt::Batches batches(stream, 8, "data.train");
  std::vector<int> inputs, targets;
  std::filesystem::resize_file(second, 1024 + 2 * 3000);
  CHECK_NOTHROW(stream.check_present(0, 5000));
  CHECK_NOTHROW(stream.check_present(4990, 8000));  // the part of the second shard still there
  CHECK_NOTHROW(batches.fill(0, 4, inputs, targets));
  const std::string e = error_of([&] { stream.check_present(4990, 8001); });
  CHECK(contains(e, "train_000001.bin: the shard is now 7024 bytes, but it held 11024 when the run opened it"));
  CHECK_THROWS_AS(batches.fill(999, 2, inputs, targets), mt::ShardChanged);  // window 999: tokens 7992-8000
  CHECK_THROWS_AS(batches.fill(1000, 1, inputs, targets), mt::ShardChanged);
  // A shard replaced by another file (a rename, as `moetrain prepare` writes) or deleted leaves the
  // run the file it mapped, still whole.
  shard_with(dir, "new.bin", 10, 3, 0);
  std::filesystem::rename(dir + "/new.bin", first);
  CHECK_NOTHROW(stream.check_present(0, 5000));
  CHECK(stream[4999] == 4999 % 200);
  std::filesystem::remove(first);
  CHECK_NOTHROW(stream.check_present(0, 5000));
  CHECK(stream[4998] == 4998 % 200);
}
