// Damaged and mismatched checkpoints: every flipped byte of a checkpoint file is caught by a
// checksum or changes nothing that loads; a damaged newest checkpoint is passed over for the
// previous one (checkpoint.resume = "auto") and the run continues exactly; a damaged checkpoint
// named explicitly, a missing manifest or file, and a checkpoint of another model stop the run
// with the file named.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "io/checkpoint.hpp"
#include "io/shards.hpp"
#include "test_helpers.hpp"
#include "train/trainer.hpp"

namespace fs = std::filesystem;

namespace {

std::string corpus() {
  static const std::string dir = [] {
    const std::string d = testing::temp_dir("ckpt_faults_corpus");
    std::vector<uint16_t> tokens;
    for (int i = 0; i < 4000; ++i) tokens.push_back(uint16_t("abcdefgh "[i % 9]));
    mt::write_shard(d + "/train_000000.bin", tokens);
    mt::write_shard(d + "/val_000000.bin", tokens);
    return d;
  }();
  return dir;
}

// Runs land in <temp>/moetrain_test_ckpt_faults_<name>/<name>.
mt::Config config(const std::string& name, int steps, std::vector<std::string> extra = {}) {
  static std::set<std::string> cleared;
  const std::string out = fs::temp_directory_path() / ("moetrain_test_ckpt_faults_" + name);
  if (cleared.insert(name).second) fs::remove_all(out);
  std::vector<std::string> sets = {
      "run.name=" + name, "run.out_dir=" + out, "data.train=" + corpus() + "/train_*.bin",
      "data.val=" + corpus() + "/val_*.bin", "model.vocab_size=128", "model.d_model=16", "model.n_layers=2",
      "model.n_heads=2", "model.head_dim=8", "model.ffn_hidden=32", "model.seq_len=8", "model.moe.expert_hidden=16",
      "model.moe.n_routed_experts=4", "model.moe.bias_update_speed=0.01", "training.steps=" + std::to_string(steps),
      "training.global_batch=4", "training.micro_batch=2", "training.eval_every=0", "checkpoint.every=1",
      "checkpoint.keep=3", "precision.device=cpu"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return mt::parse_config("", "test.toml", sets);
}

std::string run_dir(const mt::Config& c) { return c.run.out_dir + "/" + c.run.name; }

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  fs::remove(path);
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

// What a checkpoint loads into a model: everything a resumed run continues from.
struct Loaded {
  mt::TrainState state;
  std::vector<float> values, exp_avg, exp_avg_sq, buffers;
  bool operator==(const Loaded& o) const {
    return state.step == o.state.step && state.samples_seen == o.state.samples_seen && state.seed == o.state.seed &&
           values == o.values && exp_avg == o.exp_avg && exp_avg_sq == o.exp_avg_sq && buffers == o.buffers;
  }
};

Loaded load(mt::Trainer& t, const std::string& dir) {
  Loaded l;
  mt::ParamStore& p = t.model().params;
  l.state = mt::load_checkpoint(dir, {p, l.values, l.exp_avg, l.exp_avg_sq});
  for (size_t i = 0; i < p.buffer_names.size(); ++i) {
    const std::vector<float> b = p.host_buffer(int(i));
    l.buffers.insert(l.buffers.end(), b.begin(), b.end());
  }
  return l;
}

}  // namespace

TEST_CASE("every flipped byte and every truncation of a checkpoint file is caught, or loads the same") {
  const mt::Config cfg = config("flips", 2);
  mt::Trainer t(cfg, {.quiet = true});
  t.run();
  const std::string good = mt::checkpoint_dir(run_dir(cfg), 2);
  const Loaded original = load(t, good);
  const std::string copy = run_dir(cfg) + "/damaged";
  fs::copy(good, copy);
  const std::string file = copy + "/rank_00000.h5";
  const std::string bytes = read_bytes(file);
  REQUIRE(bytes.size() > 4096);
  std::mt19937_64 rng(20260101);
  int caught = 0, same = 0;
  const int flips = 600, cuts = 100;
  for (int i = 0; i < flips + cuts; ++i) {
    std::string damaged = bytes;
    const size_t at = size_t(rng() % bytes.size());
    if (i < flips) damaged[at] = char(damaged[at] ^ char(1 + rng() % 255));
    else damaged.resize(at);
    write_bytes(file, damaged);
    CAPTURE(i);
    CAPTURE(at);
    try {
      if (load(t, copy) == original) ++same;
      else FAIL_CHECK("loaded different values without an error");
    } catch (const mt::CheckpointDamaged& e) {
      CHECK(testing::contains(e.what(), file));
      ++caught;
    } catch (const std::exception& e) {
      FAIL_CHECK("not a CheckpointDamaged: " << std::string(e.what()));
    }
  }
  MESSAGE(flips << " flipped bytes and " << cuts << " truncations of a " << bytes.size() << "-byte checkpoint file: "
                << caught << " caught, " << same << " changed nothing that loads");
  CHECK(caught > (flips + cuts) / 2);
}

TEST_CASE("a damaged newest checkpoint is passed over for the previous one, and the run continues exactly") {
  const mt::TrainSummary whole = mt::Trainer(config("whole", 4), {.quiet = true}).run();
  const mt::Config cfg = config("fallback", 4);
  { mt::Trainer(cfg, {.quiet = true, .stop_after = 3}).run(); }
  const std::string newest = mt::checkpoint_dir(run_dir(cfg), 3) + "/rank_00000.h5";
  write_bytes(newest, read_bytes(newest).substr(0, 3000));  // truncated
  mt::Trainer resumed(cfg, {.quiet = true});
  const mt::TrainSummary s = resumed.run();
  CHECK(s.first_step == 2);
  REQUIRE(s.losses.size() == 2);
  CHECK(s.losses[0] == whole.losses[2]);  // bit for bit
  CHECK(s.losses[1] == whole.losses[3]);
}

TEST_CASE("a damaged checkpoint named by checkpoint.resume stops the run, naming the file") {
  const mt::Config cfg = config("explicit", 2);
  { mt::Trainer(cfg, {.quiet = true}).run(); }
  const std::string dir = mt::checkpoint_dir(run_dir(cfg), 2);
  const std::string file = dir + "/rank_00000.h5";
  write_bytes(file, read_bytes(file).substr(0, 2000));
  const mt::Config again = config("explicit", 3, {"checkpoint.resume=" + dir});
  const std::string e = testing::user_error_of([&] { mt::Trainer(again, {.quiet = true}).run(); });
  CHECK(testing::contains(e, file));
  CHECK(testing::contains(e, "cannot be read"));
}

TEST_CASE("a missing manifest, or a file the manifest lists missing, is not resumed from") {
  const mt::Config cfg = config("manifest", 2);
  { mt::Trainer(cfg, {.quiet = true}).run(); }
  const std::string one = mt::checkpoint_dir(run_dir(cfg), 1), two = mt::checkpoint_dir(run_dir(cfg), 2);
  fs::remove(one + "/manifest.toml");
  fs::remove(two + "/rank_00000.h5");
  std::string e = testing::user_error_of([&] { mt::Trainer(config("manifest", 3, {"checkpoint.resume=" + one}), {.quiet = true}).run(); });
  CHECK(testing::contains(e, one + ": not a complete checkpoint (no manifest.toml"));
  e = testing::user_error_of([&] { mt::Trainer(config("manifest", 3, {"checkpoint.resume=" + two}), {.quiet = true}).run(); });
  CHECK(testing::contains(e, two + "/rank_00000.h5: missing (manifest.toml lists it)"));
  // auto: step 2 is damaged and step 1 incomplete, so nothing can be resumed from: the run stops.
  e = testing::user_error_of([&] { mt::Trainer(config("manifest", 3), {.quiet = true}).run(); });
  CHECK(testing::contains(e, "no checkpoint of this run can be read (the newest: " + two + "/rank_00000.h5: missing"));
}

TEST_CASE("a checkpoint of another model shape stops the run, naming the checkpoint and the key") {
  const mt::Config cfg = config("shape", 2);
  { mt::Trainer(cfg, {.quiet = true}).run(); }
  // "auto" does not pass over it for an older one: a changed config is not damage.
  const std::string e = testing::user_error_of([&] {
    mt::Trainer(config("shape", 3, {"model.ffn_hidden=48"}), {.quiet = true}).run();
  });
  CHECK(testing::contains(e, mt::checkpoint_dir(run_dir(cfg), 2) + ": cannot resume with a changed model"));
  CHECK(testing::contains(e, "model.ffn_hidden = 48"));
}
