// Random mutations of valid inputs (byte flips, truncations, inserted and deleted characters,
// swapped and repeated lines, random values for keys and header fields) through the experiment
// loader and the token shard reader, in process. Every input must either load or be refused with
// mt::UserError: no other exception, no crash, no internal-error exit. Seeds are fixed; a failure
// names its case, and the case's generator is seeded by its number, so it can be replayed alone.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "io/shards.hpp"
#include "fuzz_cases.hpp"
#include "test_helpers.hpp"
#include "train/batches.hpp"

namespace {

// Every section of the experiment file, with values that validate.
const char* kValidExperiment = R"(# fuzz base
[run]
name = "fuzz"
out_dir = "runs"
seed = 1234

[model]
vocab_size = 257
d_model = 64
n_layers = 4
n_dense_layers = 1
n_heads = 4
head_dim = 16
ffn_hidden = 96
seq_len = 32
rope_theta = 10000.0
norm_eps = 1e-6
init_std = 0.02

[model.attention]
kind = "mha"
n_kv_heads = 2
q_lora_rank = 0
kv_lora_rank = 16
qk_nope_head_dim = 8
qk_rope_head_dim = 4
v_head_dim = 8

[model.moe]
n_routed_experts = 8
n_shared_experts = 1
top_k = 2
expert_hidden = 32
route_scale = 1.0
n_groups = 2
topk_groups = 1
bias_update_speed = 0.001
aux_loss = "sequence"
aux_alpha = 0.0001

[model.mtp]
depth = 1
weight = 0.3

[data]
train = "data/train_*.bin"
val = "data/val_*.bin"

[training]
steps = 300
global_batch = 16
micro_batch = 4
grad_clip = 1.0
eval_every = 50
eval_sequences = 16

[optimizer]
lr = 3e-3
beta1 = 0.9
beta2 = 0.95
eps = 1e-8
weight_decay = 0.1

[lr_schedule]
kind = "cosine"
warmup_steps = 20
min_lr_ratio = 0.1

[parallel]
dp = 2
tp = 2
pp = 2
ep = 2
vpp = 1
schedule = "1f1b"
zero = 1

[precision]
device = "cpu"
matmul = "fp32"
peak_tflops = 0

[fp8]
formats = "e4m3"
tile = 128
block = 128
scaling = "tile"
scale = "pow2"
accumulator_bits = 0
promote_every = 0
head = false
router = false

[checkpoint]
every = 100
keep = 2
resume = "auto"

[log]
every = 10
)";

// Values of every TOML type, the edges of the integer range, and small numbers that reach the
// rules tying keys together (divisibility, products of ranks).
std::string random_value(Rng& rng) {
  static const std::vector<std::string> specials = {
      "0", "-1", "1", "2", "3", "7", "65536", "2147483647", "2147483648", "-2147483648", "9223372036854775807",
      "-9223372036854775808", "0.0", "-0.0", "0.5", "1e308", "-1e308", "5e-324", "nan", "inf", "-inf", "true",
      "false", "\"\"", "\"auto\"", "\"never\"", "\"mla\"", "\"gpipe\"", "\"dualpipe\"", "\"dualpipev\"",
      "\"interleaved\"", "\"zb-h1\"", "\"global_batch\"", "\"cpu-strict\"", "\"fp8\"", "\"e4m3_e5m2\"",
      "\"\\u00e9\\u4e2d\"", "[]", "[1, 2]", "[[1], \"a\"]", "{}", "{ a = 1 }", "1979-05-27T07:32:00Z",
      "1979-05-27", "07:32:00", "0x7fffffff", "0o777", "0b101", "1_000", "+5", "'literal'", "\"\"\"multi\nline\"\"\""};
  switch (below(rng, 3)) {
    case 0: return specials[below(rng, specials.size())];
    case 1: return std::to_string(int(below(rng, 70)));
    default: return std::to_string(int64_t(rng() % 4000000000ull) - 2000000000);
  }
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) out.push_back(text.substr(start, nl - start));
  out.push_back(text.substr(start));
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" : "") + lines[i];
  return out;
}

// One mutation of an experiment file's text.
void mutate_text(std::string& text, Rng& rng) {
  static const std::string significant = "[]{}=\"'.,#\n\\ \t0123456789-+eE_:tfn";
  const int kind = int(below(rng, 8));
  if (kind < 4) return mutate_bytes(text, rng, kind, significant);
  switch (kind) {
    case 4: {  // swap two lines
      std::vector<std::string> lines = lines_of(text);
      std::swap(lines[below(rng, lines.size())], lines[below(rng, lines.size())]);
      text = joined(lines);
      break;
    }
    case 5: {  // repeat a line elsewhere
      std::vector<std::string> lines = lines_of(text);
      const std::string line = lines[below(rng, lines.size())];
      lines.insert(lines.begin() + long(below(rng, lines.size() + 1)), line);
      text = joined(lines);
      break;
    }
    default: {  // a random value for a key (twice as likely: values reach the most code)
      std::vector<std::string> lines = lines_of(text);
      std::vector<size_t> assignments;
      for (size_t i = 0; i < lines.size(); ++i)
        if (lines[i].find(" = ") != std::string::npos) assignments.push_back(i);
      if (assignments.empty()) break;
      std::string& line = lines[assignments[below(rng, assignments.size())]];
      line = line.substr(0, line.find(" = ") + 3) + random_value(rng);
      text = joined(lines);
      break;
    }
  }
}

// A --set override: a real key with a random value, or a mangled one.
std::string random_override(Rng& rng, const std::vector<std::string>& keys) {
  const std::string key = keys[below(rng, keys.size())];
  switch (below(rng, 4)) {
    case 0: return key;
    case 1: return std::string(1, '=').append(random_value(rng));
    case 2: return key.substr(0, below(rng, key.size() + 1)) + "=" + random_value(rng);
    default: return key + "=" + random_value(rng);
  }
}

std::vector<std::string> experiment_keys() {
  std::vector<std::string> keys;
  std::string section;
  for (const std::string& line : lines_of(kValidExperiment)) {
    if (line.rfind("[", 0) == 0) section = line.substr(1, line.size() - 2);
    else if (size_t eq = line.find(" = "); eq != std::string::npos) keys.push_back(section + "." + line.substr(0, eq));
  }
  return keys;
}

}  // namespace

TEST_CASE("fuzz: mutated experiment files and --set overrides load or give a UserError") {
  REQUIRE_NOTHROW(mt::parse_config(kValidExperiment, "fuzz.toml", {}));
  const std::vector<std::string> keys = experiment_keys();
  REQUIRE(keys.size() > 60);
  const int cases = fuzz_cases(30000);
  int loaded = 0, refused = 0;
  for (int i = 0; i < cases; ++i) {
    INFO("experiment case " << i);
    Rng rng(1000003ull * uint64_t(i) + 17);
    std::string text = kValidExperiment;
    const size_t mutations = 1 + below(rng, 3);
    for (size_t m = 0; m < mutations; ++m) mutate_text(text, rng);
    std::vector<std::string> sets;
    if (below(rng, 4) == 0) sets.push_back(random_override(rng, keys));
    try {
      mt::parse_config(text, "fuzz.toml", sets);
      ++loaded;
    } catch (const mt::UserError&) {
      ++refused;
    } catch (const std::exception& e) {
      FAIL("not a UserError: " << e.what() << "\n--- input ---\n" << text);
    }
  }
  MESSAGE("experiment fuzz: " << cases << " cases, " << loaded << " loaded, " << refused << " refused with a UserError");
  CHECK(loaded > cases / 50);  // some mutations leave the file valid: the loader's success path is fuzzed too
  CHECK(refused > cases / 2);
}

namespace {

// A shard as bytes: llm.c's header and uint16 tokens.
std::string shard_bytes(const std::vector<uint16_t>& tokens) {
  std::string out(1024 + 2 * tokens.size(), '\0');
  const int32_t header[3] = {mt::kShardMagic, mt::kShardVersion, int32_t(tokens.size())};
  std::memcpy(out.data(), header, sizeof header);
  std::memcpy(out.data() + 1024, tokens.data(), 2 * tokens.size());
  return out;
}

void set_int32(std::string& bytes, size_t at, int32_t v) {
  if (at + 4 <= bytes.size()) std::memcpy(bytes.data() + at, &v, 4);
}

// One mutation of a shard's bytes.
void mutate_shard(std::string& bytes, Rng& rng) {
  static const int32_t interesting[] = {0, 1, -1, 2, 255, 256, 1023, 1024, 20240520, 20240521, INT32_MAX, INT32_MIN};
  switch (below(rng, 6)) {
    case 0:  // flip a byte in the header's first fields
      if (!bytes.empty()) bytes[below(rng, std::min<size_t>(12, bytes.size()))] = char(rng());
      break;
    case 1:  // flip a byte anywhere
      if (!bytes.empty()) bytes[below(rng, bytes.size())] = char(rng());
      break;
    case 2:  // truncate
      bytes.resize(below(rng, bytes.size() + 1));
      break;
    case 3:  // append
      bytes.append(below(rng, 9), char(rng()));
      break;
    case 4:  // a header field (magic, version, token count) set to an edge value
      set_int32(bytes, 4 * below(rng, 3), interesting[below(rng, std::size(interesting))]);
      break;
    default:  // the token count off by a little
      if (bytes.size() >= 12) {
        int32_t n;
        std::memcpy(&n, bytes.data() + 8, 4);
        set_int32(bytes, 8, int32_t(int64_t(n) + int64_t(below(rng, 5)) - 2));
      }
      break;
  }
}

}  // namespace

TEST_CASE("fuzz: mutated token shards load or give a UserError") {
  const std::string dir = testing::temp_dir("fuzz_shards");
  const std::string path = dir + "/train_000000.bin";
  const int vocab = 300;
  std::vector<uint16_t> tokens(96);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint16_t((i * 37) % vocab);
  const int cases = fuzz_cases(20000);
  int loaded = 0, refused = 0, outside_vocab = 0;
  std::vector<int> inputs, targets;
  for (int i = 0; i < cases; ++i) {
    INFO("shard case " << i);
    Rng rng(7000003ull * uint64_t(i) + 5);
    std::string bytes = shard_bytes(tokens);
    const size_t mutations = 1 + below(rng, 2);
    for (size_t m = 0; m < mutations; ++m) mutate_shard(bytes, rng);
    // A new file each time: rewriting one in place makes ext4 flush it to disk on close.
    std::filesystem::remove(path);
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    try {
      const mt::TokenStream stream(path, "data.train", vocab);
      const mt::Batches batches(stream, 1 + int(below(rng, 64)), "data.train");
      batches.fill(long(below(rng, 1000)), 2, inputs, targets);
      for (int t : inputs) outside_vocab += t >= vocab;
      ++loaded;
    } catch (const mt::UserError&) {
      ++refused;
    } catch (const std::exception& e) {
      FAIL("not a UserError: " << e.what());
    }
  }
  CHECK(outside_vocab == 0);
  MESSAGE("shard fuzz: " << cases << " cases, " << loaded << " loaded, " << refused << " refused with a UserError");
  CHECK(loaded > cases / 25);  // fewer load since a byte flipped among the header's zero ints 3-255 is refused
  CHECK(refused > cases / 2);
}
