// The training loop end to end on a small synthetic corpus: the loss falls, resuming from a
// checkpoint reproduces the uninterrupted run bit for bit, log.h5 holds what it should.
#include <doctest/doctest.h>

#include <filesystem>

#include "config/config.hpp"
#include "io/h5util.hpp"
#include "io/shards.hpp"
#include "model/moe.hpp"
#include "test_helpers.hpp"
#include "train/trainer.hpp"
#include "util/error.hpp"

namespace {

// Text with structure a small model can learn quickly: counting phrases.
std::string corpus_dir() {
  static const std::string dir = [] {
    const std::string d = testing::temp_dir("corpus");
    std::vector<uint16_t> train, val;
    const char* words[] = {"one ", "two ", "three ", "four ", "five "};
    for (int i = 0; i < 3000; ++i)
      for (char ch : std::string(words[i % 5])) (i / 5 % 20 == 19 ? val : train).push_back(uint16_t(ch));
    mt::write_shard(d + "/train_000000.bin", train);
    mt::write_shard(d + "/val_000000.bin", val);
    return d;
  }();
  return dir;
}

mt::Config small_config(const std::string& name, int steps, std::vector<std::string> extra = {}) {
  const std::string out = testing::temp_dir("runs_" + name);
  std::vector<std::string> sets = {
      "run.name=" + name, "run.out_dir=" + out, "data.train=" + corpus_dir() + "/train_*.bin",
      "data.val=" + corpus_dir() + "/val_*.bin", "model.vocab_size=128", "model.d_model=32", "model.n_layers=2",
      "model.n_heads=2", "model.head_dim=16", "model.ffn_hidden=64", "model.seq_len=16", "model.moe.expert_hidden=32",
      "model.moe.n_routed_experts=4", "model.moe.aux_loss=sequence", "model.moe.aux_alpha=0.01", "model.moe.bias_update_speed=0.01",
      "training.steps=" + std::to_string(steps), "training.global_batch=4", "training.micro_batch=2",
      "training.eval_every=4", "training.eval_sequences=4", "lr_schedule.warmup_steps=2", "checkpoint.every=3",
      "precision.device=cpu-strict"};  // every training test proves the trainer keeps off device memory
  sets.insert(sets.end(), extra.begin(), extra.end());
  return mt::parse_config("", "test.toml", sets);
}

}  // namespace

TEST_CASE("training lowers the loss well below the unigram entropy") {
  mt::Trainer t(small_config("learn", 60, {"optimizer.lr=1e-2"}), {.quiet = true});
  mt::TrainSummary s = t.run();
  REQUIRE(s.losses.size() == 60);
  CHECK(s.losses.back() < 0.5 * s.unigram_entropy);
  CHECK(s.last_eval_loss < 0.5 * s.unigram_entropy);
}

TEST_CASE("every balance option trains, and the global-batch loss resumes exactly") {
  for (std::string kind : {"none", "sequence", "micro_batch", "global_batch"}) {
    CAPTURE(kind);
    mt::Trainer t(small_config("balance_" + kind, 6, {"model.moe.aux_loss=" + kind}), {.quiet = true});
    mt::TrainSummary s = t.run();
    REQUIRE(s.losses.size() == 6);
    CHECK(s.losses.back() < s.losses.front());
  }
  mt::Trainer whole(small_config("global_whole", 6, {"model.moe.aux_loss=global_batch"}), {.quiet = true});
  const auto all = whole.run().losses;
  mt::Config halves = small_config("global_halves", 6, {"model.moe.aux_loss=global_batch"});
  { mt::Trainer(halves, {.quiet = true, .stop_after = 3}).run(); }
  mt::Trainer second(halves, {.quiet = true});
  const auto rest = second.run().losses;
  REQUIRE(rest.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(rest[i] == all[3 + i]);
  CHECK(second.model().params.host_values() == whole.model().params.host_values());
}

TEST_CASE("multi-token prediction trains, and its loss is logged apart from the main loss") {
  mt::Config cfg = small_config("mtp", 8, {"model.mtp.depth=1", "model.mtp.weight=0.3"});
  mt::Trainer t(cfg, {.quiet = true});
  mt::TrainSummary s = t.run();
  mt::h5::Handle f = mt::h5::open_file(cfg.run.out_dir + "/mtp/log.h5", true);
  auto mtp = mt::h5::read_all<double>(f, "/mtp_loss", H5T_NATIVE_DOUBLE);
  REQUIRE(mtp.size() == 8);
  CHECK(mtp.front() > 0);
  CHECK(mtp.back() < mtp.front());
  CHECK(mtp.back() != s.losses.back());
}

TEST_CASE("N steps, or N/2 steps + resume + N/2 steps: identical losses and weights") {
  const int N = 8;
  mt::Trainer whole(small_config("whole", N), {.quiet = true});
  mt::TrainSummary a = whole.run();

  mt::Config half = small_config("halves", N);
  std::vector<double> losses;
  {
    mt::Trainer first(half, {.quiet = true, .stop_after = N / 2});
    mt::TrainSummary s = first.run();
    REQUIRE(s.last_step == N / 2);
    losses = s.losses;
  }
  std::vector<float> resumed_weights;
  {
    mt::Trainer second(half, {.quiet = true});  // checkpoint.resume = "auto"
    mt::TrainSummary s = second.run();
    CHECK(s.first_step == N / 2);
    losses.insert(losses.end(), s.losses.begin(), s.losses.end());
    resumed_weights = second.model().params.host_values();
    std::vector<float> m_resumed, v_resumed, m_whole, v_whole;
    second.optimizer().export_moments(m_resumed, v_resumed);
    whole.optimizer().export_moments(m_whole, v_whole);
    CHECK(m_resumed == m_whole);
    CHECK(v_resumed == v_whole);
    for (size_t i = 0; i < second.model().params.buffer_names.size(); ++i)
      CHECK(second.model().params.host_buffer(int(i)) == whole.model().params.host_buffer(int(i)));
  }
  REQUIRE(losses.size() == a.losses.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    CAPTURE(i);
    CHECK(losses[i] == a.losses[i]);  // exact: bit for bit
  }
  CHECK(resumed_weights == whole.model().params.host_values());

  // The resumed run's log has one row per step, in order, none lost or repeated.
  mt::h5::Handle f = mt::h5::open_file(half.run.out_dir + "/halves/log.h5", true);
  auto steps = mt::h5::read_all<long long>(f, "/step", H5T_NATIVE_LLONG);
  auto logged = mt::h5::read_all<double>(f, "/loss", H5T_NATIVE_DOUBLE);
  REQUIRE(steps.size() == size_t(N));
  for (int i = 0; i < N; ++i) {
    CHECK(steps[i] == i + 1);
    CHECK(logged[i] == losses[i]);
  }
}

TEST_CASE("log.h5 holds the config, per-step metrics, expert load and bias, and eval loss") {
  mt::Config cfg = small_config("logged", 5);
  mt::Trainer t(cfg, {.quiet = true});
  t.run();
  mt::h5::Handle f = mt::h5::open_file(cfg.run.out_dir + "/logged/log.h5", true);
  CHECK(mt::h5::read_string_attr(f, "config_toml") == cfg.resolved_toml);
  for (const char* name : {"/loss", "/mtp_loss", "/lr", "/grad_norm", "/tokens_per_s", "/flops_per_s", "/time/step"})
    CHECK(mt::h5::read_all<double>(f, name, H5T_NATIVE_DOUBLE).size() == 5);
  auto load = mt::h5::read_all<float>(f, "/moe/expert_load", H5T_NATIVE_FLOAT);
  REQUIRE(load.size() == 5 * 1 * 4);  // steps x MoE layers x experts
  double sum = 0;
  for (int e = 0; e < 4; ++e) sum += load[e];
  CHECK(sum == doctest::Approx(1.0));  // fractions of the routed tokens
  CHECK(mt::h5::read_all<long long>(f, "/eval/step", H5T_NATIVE_LLONG) == std::vector<long long>{4, 5});
  CHECK(std::filesystem::exists(cfg.run.out_dir + "/logged/ckpt/step_00000005/manifest.toml"));
  CHECK(std::filesystem::exists(cfg.run.out_dir + "/logged/ckpt/step_00000003/manifest.toml"));
}

TEST_CASE("an interrupted checkpoint write is never resumed from") {
  mt::Config cfg = small_config("partial", 3);
  { mt::Trainer(cfg, {.quiet = true}).run(); }
  const std::string ckpt = cfg.run.out_dir + "/partial/ckpt";
  std::filesystem::create_directories(ckpt + "/step_00000009.tmp");
  std::filesystem::create_directories(ckpt + "/step_00000010");  // no manifest: incomplete
  mt::Config more = small_config("partial_more", 5);
  more.run = cfg.run;
  mt::Trainer t(more, {.quiet = true});
  CHECK(t.run().first_step == 3);
}

TEST_CASE("auxiliary-loss-free bias: +gamma below the mean load, -gamma above") {
  mt::ModelConfig m = testing::tiny_model();
  m.moe.bias_update_speed = 0.25;
  m.moe.n_groups = 1;
  m.moe.topk_groups = 1;
  testing::StrictDevice dev;
  mt::ParamStore params;
  mt::LayerEnv env{&dev.be, mt::GemmPrecision::fp32, &params, {}};
  mt::MoE moe(env, m, "moe", 1);
  params.finalize(dev.be, 1, 0.3);
  const mt::Buffer x = dev.upload(testing::random_floats(size_t(2) * m.seq_len * m.d_model, 3));
  const mt::Buffer y = dev.floats(x.count());
  mt::Arena arena(dev.be);
  moe.forward(0, arena, arena, x.f32(), 2, y.f32(), 0.0f, nullptr);
  const std::vector<double> load = moe.router().step_load().to_host_f64();
  double total = 0;
  for (double l : load) total += l;
  CHECK(total == 2 * m.seq_len * m.moe.top_k);
  moe.router().update_bias(nullptr);
  const std::vector<float> bias = params.host_buffer(moe.router().bias);
  for (int e = 0; e < m.moe.n_routed_experts; ++e) {
    const double mean = total / m.moe.n_routed_experts;
    CAPTURE(e);
    CHECK(bias[e] == (load[e] < mean ? 0.25f : load[e] > mean ? -0.25f : 0.0f));
  }
}

TEST_CASE("missing training data stops before any work, naming the key") {
  mt::Config cfg = small_config("nodata", 2, {"data.train=/nonexistent/train_*.bin"});
  const std::string e = testing::user_error_of([&] { mt::Trainer t(cfg, {.quiet = true}); });
  CHECK(testing::contains(e, "--set data.train=/nonexistent/train_*.bin: data.train"));
  CHECK(testing::contains(e, "no shard matches"));
  CHECK(!std::filesystem::exists(cfg.run.out_dir + "/nodata"));
}
