// Hostile experiment inputs: integers past the keys' limits or past 64 bits, products of keys
// past 32-bit counts, a --set that replaces a section, a directory as the file. Each is refused
// by name with what is allowed; the parameter sums stay exact for counts near 2^31.
#include <doctest/doctest.h>

#include <climits>
#include <filesystem>
#include <string>

#include "config/config.hpp"
#include "model/flops.hpp"
#include "test_helpers.hpp"
#include "util/error.hpp"

namespace {

using testing::contains;

const char* kSmall = R"(
[model]
d_model = 16
n_layers = 2
n_heads = 2
head_dim = 8
ffn_hidden = 32
seq_len = 8

[model.moe]
n_routed_experts = 4
expert_hidden = 16

[training]
steps = 4
global_batch = 4
micro_batch = 2
)";

std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  return testing::user_error_of([&] { mt::parse_config(text, "exp.toml", sets); });
}

}  // namespace

TEST_CASE("config inputs: expert counts near 2^31 are refused with the limit") {
  CHECK(contains(error_of(kSmall, {"model.moe.n_routed_experts=2147483640"}),
                 "--set model.moe.n_routed_experts=2147483640: model.moe.n_routed_experts = 2147483640 is out of "
                 "range (at most 65536)"));
  CHECK(contains(error_of(kSmall, {"model.moe.n_shared_experts=2147483647", "model.moe.top_k=1"}),
                 "model.moe.n_shared_experts = 2147483647 is out of range (at most 1024)"));
  std::string file = kSmall;
  file.replace(file.find("expert_hidden = 16"), 18, "n_shared_experts = 2000000000");
  CHECK(contains(error_of(file),
                 "exp.toml:12:20: model.moe.n_shared_experts = 2000000000 is out of range (at most 1024)"));
  CHECK(error_of(kSmall, {"model.moe.n_routed_experts=65536", "model.moe.n_shared_experts=1024"}).empty());
}

TEST_CASE("config inputs: parameter and FLOP sums stay exact for counts near 2^31") {
  mt::ModelConfig m;
  m.n_layers = 2;
  m.n_dense_layers = 0;
  m.moe.n_shared_experts = INT_MAX;
  m.moe.top_k = 2;
  m.moe.n_routed_experts = 4;
  // Each MoE FFN: the router (d x E) and the shared plus chosen experts' SwiGLUs, 3 d h each.
  const double d = m.d_model, h = m.moe.expert_hidden;
  const double ffn_active = d * 4 + 3.0 * d * ((double(INT_MAX) + 2) * h);
  const double ffn_total = d * 4 + 3.0 * d * ((double(INT_MAX) + 4) * h);
  const double head = double(m.vocab_size) * m.d_model;
  CHECK(mt::active_matmul_params(m) ==
        doctest::Approx(2 * (mt::attention_matmul_params(m) + ffn_active) + head).epsilon(1e-12));
  CHECK(mt::total_params(m) > 2 * ffn_total);
}

TEST_CASE("config inputs: batch sizes and steps past their limits say so, with the key") {
  CHECK(contains(error_of(kSmall, {"training.global_batch=2147483640"}),
                 "training.global_batch = 2147483640 is out of range (at most 1048576)"));
  CHECK(contains(error_of(kSmall, {"training.steps=9223372036854775808"}),
                 "training.steps = 9223372036854775808 is out of range (at most 1000000000)"));
  CHECK(contains(error_of(kSmall, {"training.steps=-9223372036854775809"}),
                 "training.steps = -9223372036854775809 is out of range (at least 1)"));
  CHECK(contains(error_of(kSmall, {"optimizer.lr=1e999"}), "optimizer.lr = 1e999 is out of range"));
  std::string file = kSmall;
  file.replace(file.find("steps = 4"), 9, "steps = 9223372036854775808");
  CHECK(contains(error_of(file), "exp.toml:15:28: 'steps = 9223372036854775808' is out of range"));
}

TEST_CASE("config inputs: products of keys past 32-bit token counts are refused") {
  CHECK(contains(error_of(kSmall, {"training.global_batch=1048576", "model.seq_len=4096"}),
                 "training.global_batch = 1048576 times model.seq_len = 4096 is 4294967296 tokens per step, out of "
                 "range (at most 2147483647"));
  CHECK(contains(error_of(kSmall, {"training.global_batch=1024", "training.micro_batch=1024", "model.seq_len=1048576",
                                   "model.moe.top_k=2"}),
                 "is 2147483648 routed token copies per micro-batch, out of range"));
}

TEST_CASE("config inputs: a --set that replaces a section is blamed on the --set") {
  const std::string e = error_of(kSmall, {"model=3"});
  CHECK(contains(e, "--set model=3: 'model' is a section; set a key inside it, such as --set model.<key>=value"));
  CHECK(!contains(e, "exp.toml"));
}

TEST_CASE("config inputs: a directory as the experiment file is refused by name") {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string e = testing::user_error_of([&] { mt::load_config(dir, {}); });
  CHECK(contains(e, dir + ": is a directory, not a file"));
}
