// Random mutations of a real Hugging Face save (what `moetrain export` writes for a tiny trained
// DeepSeek-V3 model) through the readers behind `moetrain import`: the JSON reader on config.json and
// the safetensors header, read_safetensors on the whole file, and import_hf on a mutated config.json.
// Mutations: byte flips, truncations, inserted and deleted characters, members repeated and removed,
// huge and odd values, deep nesting. Every input must load or be refused with mt::UserError naming
// the file; no other exception, no crash. Seeds are fixed; a failure names its case.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "interop/hf.hpp"
#include "io/json.hpp"
#include "io/safetensors.hpp"
#include "io/shards.hpp"
#include "fuzz_cases.hpp"
#include "test_helpers.hpp"
#include "train/trainer.hpp"

namespace fs = std::filesystem;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  fs::remove(path);  // a new file each time: rewriting one in place makes ext4 flush it on close
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

// stdout goes to /dev/null while one lives (import prints a line for every model it writes).
struct QuietStdout {
  int saved;
  QuietStdout() : saved(dup(1)) {
    std::fflush(stdout);
    const int null = ::open("/dev/null", O_WRONLY);
    dup2(null, 1);
    close(null);
  }
  ~QuietStdout() {
    std::fflush(stdout);
    dup2(saved, 1);
    close(saved);
  }
};

// A tiny MLA + MoE model trained one step and exported: <temp>/moetrain_test_fuzz_readers/hf.
std::string hf_save() {
  static const std::string dir = [] {
    const std::string root = testing::temp_dir("fuzz_readers");
    std::vector<uint16_t> tokens;
    for (int i = 0; i < 400; ++i) tokens.push_back(uint16_t("abcdefgh "[i % 9]));
    mt::write_shard(root + "/train_000000.bin", tokens);
    mt::write_shard(root + "/val_000000.bin", tokens);  // with train_*, the shards an import trains on
    const mt::Config cfg = mt::parse_config(
        "", "test.toml",
        {"run.name=run", "run.out_dir=" + root, "data.train=" + root + "/train_*.bin",
         "data.val=" + root + "/train_*.bin", "model.vocab_size=128", "model.d_model=16", "model.n_layers=2",
         "model.n_dense_layers=1", "model.n_heads=2", "model.head_dim=8", "model.ffn_hidden=24",
         "model.seq_len=8", "model.attention.kind=\"mla\"", "model.attention.kv_lora_rank=8",
         "model.attention.qk_nope_head_dim=4", "model.attention.qk_rope_head_dim=4", "model.attention.v_head_dim=4",
         "model.moe.n_routed_experts=4", "model.moe.n_shared_experts=1", "model.moe.expert_hidden=8",
         "model.mtp.depth=0", "training.steps=1", "training.global_batch=2", "training.micro_batch=2",
         "training.eval_every=0", "checkpoint.every=1", "precision.device=cpu"});
    const QuietStdout quiet;
    mt::Trainer(cfg, {.quiet = true}).run();
    mt::export_hf(root + "/run", root + "/hf");
    return root + "/hf";
  }();
  return dir;
}

// The shards hf_save's run trained on, for imports of its export.
std::string hf_data() { return fs::path(hf_save()).parent_path().string(); }

// The header of a safetensors file's bytes (the JSON after the 8-byte length).
std::string header_of(const std::string& file) {
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  return file.substr(8, n);
}

// Values that reach the readers' edges: huge, negative, fractional and non-finite numbers, other
// JSON types, and nesting.
std::string random_json_value(Rng& rng) {
  static const std::vector<std::string> specials = {
      "0", "-1", "1", "2", "3", "4", "7", "8", "16", "128", "2147483647", "2147483648", "-2147483649",
      "4294967296", "9223372036854775807", "9223372036854775808", "18446744073709551615", "18446744073709551616",
      "1e19", "1e300", "1e999", "-1e999", "1.5", "-0.0", "0.0001", "5e-324", "NaN", "nan", "inf", "-inf",
      "true", "false", "null", "\"\"", "\"F32\"", "\"BF16\"", "\"F16\"", "\"F64\"", "\"I8\"", "\"yarn\"",
      "\"llama\"", "\"deepseek_v3\"", "\"\\ud800\"", "\"\\u0000\"", "[]", "[0]", "[0,0]", "[-1,4]", "[4,-1]",
      "[0,1e999]", "[1,2,3]", "[[1]]", "{}", "{\"a\":1}", "[[[[[[[[[[]]]]]]]]]]"};
  switch (below(rng, 3)) {
    case 0: return specials[below(rng, specials.size())];
    case 1: return std::to_string(int(below(rng, 300)));
    default: return std::to_string(int64_t(rng()));
  }
}

// Where each "key": value member of a JSON text starts and ends (values without nested objects).
std::vector<std::pair<size_t, size_t>> members_of(const std::string& text) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t q = text.find("\":"); q != std::string::npos; q = text.find("\":", q + 2)) {
    const size_t start = text.rfind('"', q - 1);
    size_t end = q + 2;
    int depth = 0;
    while (end < text.size() && !(depth == 0 && (text[end] == ',' || text[end] == '}'))) {
      if (text[end] == '[') ++depth;
      if (text[end] == ']') --depth;
      if (text[end] == '{') break;
      ++end;
    }
    if (start != std::string::npos && end < text.size() && text[end] != '{') out.push_back({start, end});
  }
  return out;
}

// One mutation of a JSON text.
void mutate_json(std::string& text, Rng& rng) {
  static const std::string significant = "{}[]\":,.\\ \n0123456789-+eEtfnu";
  const std::vector<std::pair<size_t, size_t>> members = members_of(text);
  const int kind = int(below(rng, 9));
  if (kind < 4) return mutate_bytes(text, rng, kind, significant);
  switch (kind) {
    case 4:  // repeat a member (a duplicated key)
      if (!members.empty()) {
        const auto [start, end] = members[below(rng, members.size())];
        text.insert(start, text.substr(start, end - start) + ",");
      }
      break;
    case 5:  // delete a member
      if (!members.empty()) {
        const auto [start, end] = members[below(rng, members.size())];
        text.erase(start, end - start + (text[end] == ',' ? 1 : 0));
      }
      break;
    case 6: {  // nest a value deeply, sometimes past the reader's bound
      if (members.empty()) break;
      const size_t colon = text.find(':', members[below(rng, members.size())].first);
      const size_t depth = below(rng, 2) ? below(rng, 40) : 500 + below(rng, 30);
      text.insert(colon + 1, std::string(depth, '['));
      text.insert(text.find_first_of(",}", colon + 1 + depth), std::string(below(rng, 4) ? depth : 0, ']'));
      break;
    }
    default:  // a random value for a member (more likely: values reach the most code)
      if (!members.empty()) {
        const auto [start, end] = members[below(rng, members.size())];
        const size_t colon = text.find(':', start);
        text.replace(colon + 1, end - colon - 1, random_json_value(rng));
      }
      break;
  }
}

// Runs `f`; true if it returned, false if it threw a UserError naming `name`; fails the test on any
// other exception or a UserError that does not name it.
template <typename F>
bool loads(F&& f, const std::string& name) {
  try {
    f();
    return true;
  } catch (const mt::UserError& e) {
    CHECK_MESSAGE(testing::contains(e.what(), name), "the error does not name " << name << ": " << e.what());
  } catch (const std::exception& e) {
    FAIL("not a UserError: " << e.what());
  }
  return false;
}

}  // namespace

TEST_CASE("fuzz: mutated config.json and safetensors headers parse or give a UserError with the byte") {
  const std::string config = read_bytes(hf_save() + "/config.json");
  const std::string header = header_of(read_bytes(hf_save() + "/model.safetensors"));
  REQUIRE(mt::parse_json(config, "config.json").at("model_type", "config.json").string == "deepseek_v3");
  REQUIRE(mt::parse_json(header, "header").object.size() > 20);
  const int cases = fuzz_cases(6000);
  int parsed = 0, refused = 0;
  for (int i = 0; i < cases; ++i) {
    INFO("JSON case " << i);
    Rng rng(2000003ull * uint64_t(i) + 11);
    std::string text = i % 2 ? config : header;
    const size_t mutations = 1 + below(rng, 3);
    for (size_t m = 0; m < mutations; ++m) mutate_json(text, rng);
    const bool ok = loads([&] { mt::parse_json(text, "fuzz.json"); }, "fuzz.json: byte ");
    (ok ? parsed : refused)++;
  }
  MESSAGE("JSON fuzz: " << cases << " cases, " << parsed << " parsed, " << refused << " refused with a UserError");
  CHECK(parsed > cases / 10);
  CHECK(refused > cases / 4);
}

TEST_CASE("fuzz: mutated safetensors files read or give a UserError naming the file") {
  const std::string file = read_bytes(hf_save() + "/model.safetensors");
  const std::string header = header_of(file), data = file.substr(8 + header.size());
  const std::string path = testing::temp_dir("fuzz_safetensors") + "/model.safetensors";
  const int cases = fuzz_cases(3000);
  int loaded = 0, refused = 0;
  for (int i = 0; i < cases; ++i) {
    INFO("safetensors case " << i);
    Rng rng(3000017ull * uint64_t(i) + 3);
    std::string h = header, bytes;
    const size_t mutations = 1 + below(rng, 2);
    for (size_t m = 0; m < mutations; ++m) mutate_json(h, rng);
    uint64_t length = h.size();
    static const uint64_t lengths[] = {0, 1, 7, 8, UINT64_MAX, UINT64_MAX - 7, uint64_t(INT64_MAX), 1ull << 32};
    if (below(rng, 10) == 0) length = lengths[below(rng, std::size(lengths))];
    if (below(rng, 10) == 0) length += below(rng, 17) - 8;
    bytes.append(reinterpret_cast<const char*>(&length), 8).append(h).append(data);
    if (below(rng, 6) == 0) bytes.resize(below(rng, bytes.size() + 1));
    if (below(rng, 6) == 0 && !bytes.empty()) bytes[below(rng, bytes.size())] = char(rng());
    write_bytes(path, bytes);
    const bool ok = loads(
        [&] {
          for (const auto& [name, t] : mt::read_safetensors(path)) {
            size_t n = 1;
            for (int64_t d : t.shape) n *= size_t(d);
            CHECK(n == t.values.size());
          }
        },
        path);
    (ok ? loaded : refused)++;
  }
  MESSAGE("safetensors fuzz: " << cases << " cases, " << loaded << " read, " << refused
                                << " refused with a UserError");
  CHECK(loaded > cases / 20);
  CHECK(refused > cases / 4);
}

TEST_CASE("fuzz: an import of a save with a mutated config.json succeeds or gives a UserError") {
  const std::string config = read_bytes(hf_save() + "/config.json");
  const std::string dir = testing::temp_dir("fuzz_import"), out = dir + "/out";
  fs::copy_file(hf_save() + "/model.safetensors", dir + "/model.safetensors");
  const int cases = fuzz_cases(400);
  int imported = 0, refused = 0;
  for (int i = 0; i < cases; ++i) {
    INFO("config.json case " << i);
    Rng rng(5000011ull * uint64_t(i) + 7);
    std::string text = config;
    const size_t mutations = 1 + below(rng, 2);
    for (size_t m = 0; m < mutations; ++m) mutate_json(text, rng);
    write_bytes(dir + "/config.json", text);
    fs::remove_all(out);
    const QuietStdout quiet;
    const bool ok = loads([&] { mt::import_hf(dir, out, hf_data(), 1); }, dir);
    (ok ? imported : refused)++;
  }
  MESSAGE("import fuzz: " << cases << " cases, " << imported << " imported, " << refused
                           << " refused with a UserError");
  CHECK(imported > cases / 20);
  CHECK(refused > cases / 4);
}

TEST_CASE("safetensors: a shape or byte offset that is negative, fractional or past the file is refused") {
  const std::string dir = testing::temp_dir("safetensors_numbers");
  auto error_of = [&](const std::string& entry) {
    const std::string header = "{\"t\":" + entry + "}";
    const uint64_t length = header.size();
    write_bytes(dir + "/m.safetensors",
                std::string(reinterpret_cast<const char*>(&length), 8) + header + std::string(16, '\0'));
    return testing::user_error_of([&] { mt::read_safetensors(dir + "/m.safetensors"); });
  };
  const std::string file = dir + "/m.safetensors: t: ";
  // 2^62 F32 values are 2^64 bytes, which wrapped to the empty range [0, 0].
  CHECK(testing::contains(error_of(R"({"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]})"),
                          file + "shape: each size must be a whole number from 0 to "));
  CHECK(testing::contains(error_of(R"({"dtype":"F32","shape":[4,5],"data_offsets":[0,0]})"),
                          file + "shape: more values than the file's"));
  CHECK(testing::contains(error_of(R"({"dtype":"F32","shape":[1],"data_offsets":[-4,0]})"),
                          file + "data_offsets must be [begin, end], whole numbers"));
  CHECK(testing::contains(error_of(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})"), file + "shape: each size"));
  CHECK(testing::contains(error_of(R"({"dtype":"F32","shape":[1],"data_offsets":[0,"4"]})"), file + "data_offsets must be [begin, end]"));
  CHECK(testing::contains(error_of(R"({"dtype":"F32","shape":[1],"data_offsets":[0,1e999]})"),
                          file + "data_offsets must be [begin, end]"));
  CHECK(error_of(R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})").empty());
}

TEST_CASE("a config.json that describes a larger model than its safetensors hold is refused before allocating") {
  const std::string dir = testing::temp_dir("import_too_large");
  fs::copy_file(hf_save() + "/model.safetensors", dir + "/model.safetensors");
  std::string config = read_bytes(hf_save() + "/config.json");
  const size_t at = config.find("\"vocab_size\": ") + 14;
  // The largest vocabulary moetrain allows (2^24) asks for gigabytes at this width.
  config.replace(at, config.find(',', at) - at, "16000000");
  write_bytes(dir + "/config.json", config);
  CHECK(testing::contains(testing::user_error_of([&] { mt::import_hf(dir, dir + "/out", hf_data(), 1); }),
                          dir + "/config.json: describes a model of 512"));
  CHECK(!fs::exists(dir + "/out"));
}

TEST_CASE("a size in config.json that is fractional or past long long is refused with the key") {
  const std::string dir = testing::temp_dir("import_fractional");
  fs::copy_file(hf_save() + "/model.safetensors", dir + "/model.safetensors");
  const std::string config = read_bytes(hf_save() + "/config.json");
  auto error_with = [&](const std::string& key, const std::string& value) {
    std::string text = config;
    const size_t at = text.find("\"" + key + "\": ") + key.size() + 4;
    text.replace(at, text.find(',', at) - at, value);
    write_bytes(dir + "/config.json", text);
    fs::remove_all(dir + "/out");
    const QuietStdout quiet;
    return testing::user_error_of([&] { mt::import_hf(dir, dir + "/out", hf_data(), 1); });
  };
  // 16.5 was read as 16 and the import went through.
  CHECK(testing::contains(error_with("hidden_size", "16.5"),
                          dir + "/config.json: hidden_size = 16.5: expected a whole number"));
  CHECK(testing::contains(error_with("vocab_size", "1e19"), "vocab_size = 1e+19: expected a whole number from 1 to 2147483647"));
  CHECK(testing::contains(error_with("num_hidden_layers", "-1e300"), "num_hidden_layers = -1e+300: expected a whole number"));
  CHECK(error_with("hidden_size", "16").empty());
}

TEST_CASE("JSON nested a million deep is refused at the bound, in config.json and a safetensors header") {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  CHECK(testing::contains(testing::user_error_of([&] { mt::parse_json(deep, "deep.json"); }),
                          "deep.json: byte 512: objects and arrays nest deeper than 512 levels"));
  std::string objects;
  for (int i = 0; i < 1000000; ++i) objects += "{\"a\":";
  CHECK(testing::contains(testing::user_error_of([&] { mt::parse_json(objects, "deep.json"); }), "deeper than 512"));
  // 512 levels are read.
  CHECK(mt::parse_json(std::string(512, '[') + std::string(512, ']'), "ok.json").array.size() == 1);

  const std::string dir = testing::temp_dir("deep_json");
  const std::string header = "{\"x\":" + deep + "}";
  const uint64_t length = header.size();
  write_bytes(dir + "/model.safetensors", std::string(reinterpret_cast<const char*>(&length), 8) + header);
  CHECK(testing::contains(testing::user_error_of([&] { mt::read_safetensors(dir + "/model.safetensors"); }),
                          dir + "/model.safetensors (header): byte 516: objects and arrays nest deeper"));
  write_bytes(dir + "/config.json", "{\"model_type\": " + deep + "}");
  CHECK(testing::contains(testing::user_error_of([&] { mt::import_hf(dir, dir + "/out", hf_data(), 1); }),
                          dir + "/config.json: byte 526: objects and arrays nest deeper than 512 levels"));
}

// toml++ bounds arrays and inline tables at 256 levels; a dotted key of 100,000 parts overflowed its
// stack, so the loader bounds a key's parts before toml++ reads the file.
TEST_CASE("TOML nested a million deep is refused with the line: values by toml++, keys by the loader") {
  const std::string arrays = "[model]\nd_model = " + std::string(1000000, '[') + std::string(1000000, ']') + "\n";
  const std::string error = testing::user_error_of([&] { mt::parse_config(arrays, "deep.toml", {}); });
  CHECK(testing::contains(error, "deep.toml:2:"));
  CHECK(testing::contains(error, "exceeded maximum nested value depth of 256"));
  std::string tables = "[model]\nd_model = ";
  for (int i = 0; i < 1000000; ++i) tables += "{a=";
  CHECK(testing::contains(testing::user_error_of([&] { mt::parse_config(tables, "deep.toml", {}); }),
                          "exceeded maximum nested value depth"));
  std::string dotted;
  for (int i = 0; i < 1000000; ++i) dotted += "a.";
  const std::string too_many = "a key of more than 64 dotted parts; moetrain's keys have at most three";
  const std::string deep_key = "[run]\n" + dotted + "b = 1\n";
  CHECK(testing::contains(testing::user_error_of([&] { mt::parse_config(deep_key, "deep.toml", {}); }),
                          "deep.toml:2: " + too_many));
  CHECK(testing::contains(testing::user_error_of([&] { mt::parse_config("\n[" + dotted + "b]\n", "deep.toml", {}); }),
                          "deep.toml:2: " + too_many));
  CHECK(testing::contains(testing::user_error_of([&] { mt::parse_config("", "deep.toml", {dotted + "b=1"}); }),
                          too_many));
  // 64 parts reach toml++ (and are an unknown key); a long array of numbers is no key.
  std::string parts_64 = "a";
  for (int i = 1; i < 64; ++i) parts_64 += ".a";
  CHECK(testing::contains(testing::user_error_of([&] { mt::parse_config(parts_64 + " = 1\n", "deep.toml", {}); }),
                          "unknown key"));
  std::string floats = "[run]\nlist = [\n  [0.5";
  for (int i = 0; i < 100; ++i) floats += ", 1.5";
  CHECK(testing::contains(testing::user_error_of([&] { mt::parse_config(floats + "],\n]\n", "deep.toml", {}); }),
                          "deep.toml:2:1: unknown key 'run.list'"));
}
