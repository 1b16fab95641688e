// Experiment files: every bad input is rejected with a message that names the place, the key
// and what would be valid; overrides work like file keys.
#include <doctest/doctest.h>

#include <string>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/config.hpp"
#include "config/reference.hpp"
#include "config/schema.hpp"
#include "test_helpers.hpp"
#include "util/error.hpp"

namespace {

const char* kValid = R"(
[model]
d_model = 64
n_heads = 4
head_dim = 16

[model.moe]
n_routed_experts = 4
top_k = 2

[training]
steps = 10
)";

// The message of the UserError parse_config throws, or "" if it accepts the text.
std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  return testing::user_error_of([&] { mt::parse_config(text, "exp.toml", sets); });
}

using testing::contains;

}  // namespace

TEST_CASE("a valid file parses, defaults fill the rest and the resolved TOML holds every key") {
  mt::Config c = mt::parse_config(kValid, "exp.toml");
  CHECK(c.model.d_model == 64);
  CHECK(c.model.moe.top_k == 2);
  CHECK(c.training.steps == 10);
  CHECK(c.training.micro_batch == 8);  // default
  CHECK(contains(c.resolved_toml, "d_model = 64"));
  CHECK(contains(c.resolved_toml, "micro_batch = 8"));
  CHECK(c.origin.at("model.d_model") == "exp.toml:3:11");
  // The resolved text is itself a valid experiment that resolves to the same text.
  CHECK(mt::parse_config(c.resolved_toml, "again.toml").resolved_toml == c.resolved_toml);
}

TEST_CASE("unknown key: position, key and a suggestion") {
  const std::string e = error_of(std::string(kValid) + "warmup = 3\n[optimizer]\nlearning_rate = 1e-3\n");
  CHECK(contains(e, "exp.toml:13:1"));
  CHECK(contains(e, "unknown key 'training.warmup'"));
  const std::string e2 = error_of(std::string(kValid) + "[optimizer]\nlrr = 1e-3\n");
  CHECK(contains(e2, "unknown key 'optimizer.lrr'"));
  CHECK(contains(e2, "did you mean 'optimizer.lr'"));
}

TEST_CASE("wrong type: says what the key must be and what it got") {
  const std::string e = error_of("[model]\nd_model = \"big\"\n");
  CHECK(contains(e, "exp.toml:2:11"));
  CHECK(contains(e, "model.d_model must be an integer in [1, 65536], got a string"));
  CHECK(contains(error_of("[optimizer]\nlr = true\n"), "optimizer.lr must be a number > 0, got a boolean"));
  CHECK(contains(error_of("[model]\nd_model = 1.5\n"), "must be an integer"));
  CHECK(contains(error_of("[checkpoint]\nfinal = \"no\"\n"), "checkpoint.final must be true or false, got a string"));
}

TEST_CASE("out-of-range values") {
  CHECK(contains(error_of("[optimizer]\nbeta2 = 1.0\n"), "optimizer.beta2 must be [0, 1), got 1"));
  CHECK(contains(error_of("[training]\nsteps = 0\n"), "training.steps must be in [1, 1000000000], got 0"));
  CHECK(contains(error_of("[lr_schedule]\nkind = \"linear\"\n"), "must be one of \"cosine\" | \"constant\", got \"linear\""));
}

TEST_CASE("top_k larger than the number of experts") {
  const std::string e = error_of("[model.moe]\nn_routed_experts = 4\ntop_k = 6\n");
  CHECK(contains(e, "exp.toml:3:9"));
  CHECK(contains(e, "model.moe.top_k = 6 must be <= model.moe.n_routed_experts = 4"));
}

TEST_CASE("d_model not divisible by the number of heads") {
  const std::string e = error_of("[model]\nd_model = 100\nn_heads = 3\n");
  CHECK(contains(e, "exp.toml:3:11"));
  CHECK(contains(e, "model.n_heads = 3 must divide model.d_model = 100"));
}

TEST_CASE("other cross-field rules") {
  CHECK(contains(error_of("[training]\nglobal_batch = 10\nmicro_batch = 4\n"), "training.micro_batch = 4 must divide training.global_batch = 10"));
  CHECK(contains(error_of("[model]\nn_layers = 2\nn_dense_layers = 3\n"), "must be <= model.n_layers = 2"));
  CHECK(contains(error_of("[parallel]\npp = 5\n[training]\nglobal_batch = 10\nmicro_batch = 2\n"),
                 "model.n_layers = 4 is fewer than the 5 pipeline stages of parallel.schedule = \"1f1b\" with pp = 5: "
                 "every stage needs at least one block"));
  CHECK(contains(error_of("[parallel]\npp = 3\nschedule = \"dualpipe\"\n"), "dualpipe needs an even pp"));
  CHECK(contains(error_of("[parallel]\npp = 2\nschedule = \"dualpipe\"\n"),
                 "dualpipe needs an even number of micro-batches, at least 2*pp = 4 (half enter at each end): use 4 "
                 "(each pipeline runs training.global_batch / (micro_batch * dp) = 2 micro-batches per step)"));
  CHECK(contains(error_of("[parallel]\npp = 2\n[model.moe]\naux_loss = \"global_batch\"\n"),
                 "parallel.schedule = \"1f1b\" runs backward passes before the step's last forward"));
  CHECK(contains(error_of("[parallel]\ntp = 3\n"), "parallel.tp = 3 must divide model.n_heads = 4 (each rank holds whole heads): use one of 1, 2, 4"));
  CHECK(contains(error_of("[parallel]\ndp = 2\nep = 4\n[training]\nmicro_batch = 4\n"),
                 "parallel.ep = 4 must divide parallel.dp * parallel.tp = 2 (experts spread over the ranks of a stage): use one of 1, 2"));
  CHECK(contains(error_of("[parallel]\ndp = 2\ntp = 3\nep = 3\n[model]\nn_heads = 3\nhead_dim = 32\nd_model = 96\nffn_hidden = 384\nseq_len = 96\n[training]\nmicro_batch = 4\n"),
                 "parallel.ep = 3 must divide model.moe.n_routed_experts = 8"));
  CHECK(contains(error_of("[parallel]\ntp = 3\n[model]\nn_heads = 3\nhead_dim = 32\nd_model = 96\nffn_hidden = 384\nseq_len = 16\n[training]\nmicro_batch = 2\n"),
                 "parallel.tp = 3 must divide the tokens of a micro-batch, training.micro_batch * model.seq_len = 32 (the MoE "
                 "and sequence parallelism split them over the tensor-parallel ranks): use one of 1, 2, 4, 8, 16, 32"));
  // A dense model has no tokens to split, unless sequence parallelism splits them.
  const std::string dense_tp3 = "[model]\nn_heads = 3\nhead_dim = 32\nd_model = 96\nffn_hidden = 384\nseq_len = 16\nn_dense_layers = 4\n[training]\nmicro_batch = 2\n";
  CHECK(error_of("[parallel]\ntp = 3\n" + dense_tp3) == "");
  CHECK(contains(error_of("[parallel]\ntp = 3\nsequence_parallel = true\n" + dense_tp3),
                 "parallel.tp = 3 must divide the tokens of a micro-batch"));
  CHECK(contains(error_of("[parallel]\nsequence_parallel = true\n"),
                 "parallel.sequence_parallel = true splits rows over the tensor-parallel ranks and needs parallel.tp > 1 (now 1)"));
  CHECK(contains(error_of("[parallel]\nvpp = 2\n"), "parallel.vpp = 2 applies to parallel.schedule = \"interleaved\" only"));
  CHECK(contains(error_of("[parallel]\npp = 2\nzero = 3\n"), "parallel.zero = 3 (FSDP) gathers each block's weights"));
  CHECK(contains(error_of("[parallel]\nschedule = \"dualpipev\"\nzero = 3\n"), "use parallel.pp = 1 with schedule \"1f1b\""));
  CHECK(error_of("[parallel]\ndp = 2\nzero = 3\n[training]\nmicro_batch = 4\n") == "");
  CHECK(contains(error_of("[parallel]\ndp = 3\n"), "training.global_batch = 16 must be a multiple of parallel.dp * training.micro_batch = 24"));
  // A rule broken by a default names the default.
  CHECK(contains(error_of("[model]\nd_model = 90\n"), "exp.toml (default of model.n_heads): model.n_heads = 4 must divide"));
}

TEST_CASE("attention settings") {
  CHECK(contains(error_of("[model]\nn_heads = 4\n[model.attention]\nn_kv_heads = 3\n"),
                 "exp.toml:4:14: model.attention.n_kv_heads = 3 must divide model.n_heads = 4"));
  CHECK(contains(error_of("[model.attention]\nkind = \"mla\"\nqk_rope_head_dim = 5\n"),
                 "model.attention.qk_rope_head_dim = 5 must be even"));
  CHECK(contains(error_of("[model.attention]\nkind = \"gqa\"\n"), "must be one of \"mha\" | \"mla\", got \"gqa\""));
  // MLA does not split d_model into heads, so any head count works.
  CHECK(error_of("[model]\nd_model = 90\nn_heads = 4\n[model.attention]\nkind = \"mla\"\n") == "");
}

TEST_CASE("TOML syntax errors give line and column") {
  const std::string e = error_of("[model]\nd_model = = 3\n");
  CHECK(contains(e, "exp.toml:2:"));
  CHECK(contains(e, "TOML syntax error"));
}

TEST_CASE("--set overrides file keys, creates missing sections, and is checked like the file") {
  mt::Config c = mt::parse_config(kValid, "exp.toml", {"training.steps=25", "run.name=sweep_a", "optimizer.lr=1e-4"});
  CHECK(c.training.steps == 25);
  CHECK(c.run.name == "sweep_a");
  CHECK(c.optimizer.lr == doctest::Approx(1e-4));
  CHECK(c.origin.at("training.steps") == "--set training.steps=25");
  CHECK(contains(error_of(kValid, {"training.stepz=3"}), "--set training.stepz=3: unknown key 'training.stepz'"));
  CHECK(contains(error_of(kValid, {"model.moe.top_k=9"}), "--set model.moe.top_k=9: model.moe.top_k = 9 must be <="));
  CHECK(contains(error_of(kValid, {"training.steps"}), "expected --set section.key=value"));
  CHECK(contains(error_of(kValid, {"model.d_model.x=1"}), "'d_model' in the key is a value"));
}

TEST_CASE("a missing experiment file names the path") {
  try {
    mt::load_config("no/such/exp.toml");
    FAIL("expected an error");
  } catch (const mt::UserError& e) {
    CHECK(contains(e.what(), "no/such/exp.toml: cannot open"));
  }
}

TEST_CASE("every experiment in configs/ is valid") {
  int count = 0;
  for (auto& entry : std::filesystem::directory_iterator("configs")) {
    if (entry.path().extension() != ".toml") continue;
    CAPTURE(entry.path().string());
    CHECK(testing::user_error_of([&] { mt::load_config(entry.path().string()); }) == "");
    ++count;
  }
  CHECK(count >= 3);  // tiny, deepseek-v3, deepseek-v3-small
}

TEST_CASE("docs/config.md's config reference is the table `moetrain keys` prints") {
  std::ifstream in("docs/config.md");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::string table = mt::config_reference_markdown();
  CHECK(contains(text.str(), table));  // regenerate it with scripts/update_config_keys.sh
  mt::Config c;
  for (auto& f : mt::schema_fields(c)) {
    CAPTURE(f.key);
    CHECK(contains(table, "| `" + f.key + "` |"));
  }
}
