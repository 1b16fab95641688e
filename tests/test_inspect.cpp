// The pure parts of `moetrain inspect`: config flattening and diffing, smoothing, medians, expert
// imbalance, JSON/CSV encoding, and the writer check and run summary over a log written here.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "util/escape.hpp"
#include "inspect/flat_config.hpp"
#include "inspect/records.hpp"
#include "inspect/run_stats.hpp"
#include "inspect/run_summary.hpp"
#include "inspect/writer_state.hpp"
#include "io/run_lock.hpp"
#include "io/run_log.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;

TEST_CASE("flatten_config: dotted keys, kinds, shortest numbers, strings without quotes") {
  const mt::FlatConfig c = mt::flatten_config(
      "[optimizer]\nlr = 0.0030000000000000001\n[model]\nd_model = 128\n[model.moe]\naux_loss = 'sequence'\n"
      "[fp8]\nhead = false\n",
      "test");
  REQUIRE(c.size() == 4);
  CHECK(c.at("optimizer.lr").kind == mt::ConfigValue::Kind::floating);
  CHECK(c.at("optimizer.lr").text == "0.003");
  CHECK(c.at("optimizer.lr").number == 0.003);
  CHECK(c.at("model.d_model").kind == mt::ConfigValue::Kind::integer);
  CHECK(c.at("model.d_model").text == "128");
  CHECK(c.at("model.moe.aux_loss").text == "sequence");
  CHECK(c.at("fp8.head").text == "false");
  CHECK(mt::config_int(c, "model.d_model", -1) == 128);
  CHECK(mt::config_int(c, "model.n_layers", -1) == -1);
  CHECK(mt::config_int(c, "optimizer.lr", -1) == -1);  // not an integer
  CHECK(mt::config_number(c, "optimizer.lr", 0) == 0.003);
  CHECK(mt::config_text(c, "run.name", "none") == "none");
  CHECK_THROWS_WITH_AS(mt::flatten_config("[model\n", "runs/x/log.h5"), doctest::Contains("runs/x/log.h5: the stored config is not valid TOML (line 1"),
                       mt::UserError);
}

TEST_CASE("differing_keys: only keys whose values differ; a missing key differs; ignored keys left out") {
  const mt::FlatConfig a = mt::flatten_config("[o]\nlr = 0.1\nwd = 0.5\n[run]\nname = 'a'\n[x]\nonly_a = 1\n", "a");
  const mt::FlatConfig b =
      mt::flatten_config("[o]\nlr = 0.10000000000000001\nwd = 0.25\n[run]\nname = 'b'\n", "b");  // the same lr
  const mt::FlatConfig c = mt::flatten_config("[o]\nlr = 0.2\nwd = 0.5\n[run]\nname = 'c'\n", "c");
  CHECK(mt::differing_keys({&a, &b}, {"run.name"}) == std::vector<std::string>{"o.wd", "x.only_a"});
  CHECK(mt::differing_keys({&a, &c}, {}) == std::vector<std::string>{"o.lr", "run.name", "x.only_a"});
  CHECK(mt::differing_keys({&a, &a}, {}).empty());
  // A string "1" and an integer 1 are different settings.
  const mt::FlatConfig s = mt::flatten_config("v = '1'\n", "s"), i = mt::flatten_config("v = 1\n", "i");
  CHECK(mt::differing_keys({&s, &i}, {}) == std::vector<std::string>{"v"});
}

TEST_CASE("smoothing: mean of the last N, the best window and where it ends") {
  const std::vector<double> v{5, 4, 3, 1, 2, 6};
  CHECK(mt::tail_mean(v, 2) == 4.0);
  CHECK(mt::tail_mean(v, 100) == doctest::Approx(21.0 / 6));
  CHECK(std::isnan(mt::tail_mean({}, 3)));
  const mt::WindowMean best = mt::best_window_mean(v, 2);
  CHECK(best.mean == 1.5);  // {1, 2}
  CHECK(best.last == 4);
  const mt::WindowMean whole = mt::best_window_mean(v, 10);  // longer than the series: the whole of it
  CHECK(whole.mean == doctest::Approx(3.5));
  CHECK(whole.last == 5);
  CHECK(mt::best_window_mean(v, 1).last == 3);
  CHECK(std::isnan(mt::best_window_mean({}, 2).mean));
}

TEST_CASE("median_after_first: leaves out the first (warm-up) step and NaNs") {
  CHECK(mt::median_after_first({1000, 3, 1, 2}) == 2.0);
  CHECK(mt::median_after_first({1000, 4, 1, 2, 3}) == 2.5);
  CHECK(mt::median_after_first({7}) == 7.0);
  CHECK(mt::median_after_first({1, NAN, 5}) == 5.0);
  CHECK(std::isnan(mt::median_after_first({NAN, NAN})));
  CHECK(std::isnan(mt::median_after_first({})));
}

TEST_CASE("expert_imbalance: busiest over mean load per layer, averaged over the first and last tenth") {
  const int layers = 2, experts = 4;
  const size_t steps = 20;  // a tenth: 2 steps
  std::vector<float> load(steps * layers * experts, 0.25f);
  auto set = [&](size_t s, int l, std::vector<float> v) {
    std::copy(v.begin(), v.end(), load.begin() + (s * layers + l) * experts);
  };
  set(0, 0, {1, 0, 0, 0});          // 4: every token on one expert
  set(1, 0, {0.5, 0.5, 0, 0});      // 2
  set(2, 0, {1, 0, 0, 0});          // outside the first tenth
  set(19, 1, {0.4, 0.2, 0.2, 0.2});  // 1.6
  const auto im = mt::expert_imbalance(load, steps, layers, experts);
  REQUIRE(im.size() == 2);
  CHECK(im[0].first == doctest::Approx(3.0));
  CHECK(im[0].last == doctest::Approx(1.0));
  CHECK(im[1].first == doctest::Approx(1.0));
  CHECK(im[1].last == doctest::Approx(1.3));
  // Fewer than ten steps: one step each.
  const auto one = mt::expert_imbalance(std::vector<float>(load.begin(), load.begin() + 3 * layers * experts), 3,
                                        layers, experts);
  CHECK(one[0].first == doctest::Approx(4.0));
  CHECK(one[0].last == doctest::Approx(4.0));
  CHECK(mt::expert_imbalance({}, 0, layers, experts).empty());
}

TEST_CASE("JSON and CSV escaping, shortest numbers") {
  CHECK(mt::json_string("plain") == "\"plain\"");
  CHECK(mt::json_string("a\"b\\c\nd\te\x01") == "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
  CHECK(mt::json_string("héllo") == "\"héllo\"");
  CHECK(mt::json_number(0.1) == "0.1");
  CHECK(mt::json_number(NAN) == "null");
  CHECK(mt::json_number(INFINITY) == "null");
  CHECK(mt::json_number(2.3514197372650583) == "2.3514197372650583");
  CHECK(std::stod(mt::shortest_number(1.0 / 3)) == 1.0 / 3);
  CHECK(mt::shortest_number(128) == "128");
  CHECK(mt::csv_field("plain") == "plain");
  CHECK(mt::csv_field("a,b") == "\"a,b\"");
  CHECK(mt::csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(mt::csv_field("two\nlines") == "\"two\nlines\"");
  CHECK(mt::csv_field(" padded") == "\" padded\"");
  CHECK(mt::csv_field("") == "");
}

TEST_CASE("records: JSON objects with a config object, CSV with the config keys of every record as columns") {
  const mt::FlatConfig a = mt::flatten_config("[o]\nlr = 0.5\nname = 'x,y'\n", "a");
  const mt::FlatConfig b = mt::flatten_config("[o]\nlr = 0.25\nextra = true\n", "b");
  mt::Record ra{{{"dir", mt::text_cell("runs/a")}, {"loss", mt::number_cell(NAN)}, {"steps", mt::integers_cell({1, 2})}}, &a};
  mt::Record rb{{{"dir", mt::text_cell("runs/b")}, {"loss", mt::number_cell(2.5)}, {"steps", mt::integers_cell({})}}, &b};
  CHECK(mt::records_json({ra, rb}) ==
        "[\n  {\"dir\": \"runs/a\", \"loss\": null, \"steps\": [1, 2], \"config\": {\"o.lr\": 0.5, \"o.name\": \"x,y\"}},\n"
        "  {\"dir\": \"runs/b\", \"loss\": 2.5, \"steps\": [], \"config\": {\"o.extra\": true, \"o.lr\": 0.25}}\n]\n");
  CHECK(mt::records_csv({ra, rb}) ==
        "dir,loss,steps,o.extra,o.lr,o.name\n"
        "runs/a,,1 2,,0.5,\"x,y\"\n"
        "runs/b,2.5,,true,0.25,\n");
  CHECK(mt::records_json({}) == "[]\n");
}

namespace {
// A log as the trainer writes it: `rows` steps of a run configured for `steps_total`.
void write_log(const fs::path& dir, int rows, int steps_total, bool keep_open, const std::function<void()>& while_open) {
  mt::RunFacts facts;
  facts.config_toml = "[run]\nname = 'unit'\n[training]\nsteps = " + std::to_string(steps_total) +
                      "\nglobal_batch = 4\n[model]\nseq_len = 8\n";
  facts.texts = {{"device", "cpu"}, {"layout", "dp=1"}};
  facts.moe_layers = 1;
  facts.experts = 2;
  mt::RunLog log((dir / "log.h5").string(), facts, 0);
  for (int s = 1; s <= rows; ++s) {
    mt::StepRecord r;
    r.step = s;
    r.loss = 10.0 - s;  // 9, 8, 7, ...
    r.tokens_per_s = s == 1 ? 1.0 : 100.0 * s;
    r.mfu = NAN;
    r.expert_load = {0.75f, 0.25f};
    r.expert_bias = {0, 0};
    r.rank_phases.assign(mt::kPhases, 0.0f);
    log.append(r);
  }
  log.append_eval(2, 7.5);
  log.append_eval(rows, 8.5);
  if (keep_open) while_open();
}
}  // namespace

TEST_CASE("summarize_run: progress, smoothed and best losses, speed, status while written and after") {
  const fs::path dir = fs::temp_directory_path() / "mt_inspect_summary";
  fs::remove_all(dir);
  fs::create_directories(dir / "ckpt" / "step_00000002");
  fs::create_directories(dir / "ckpt" / "step_00000004.tmp");
  std::ofstream(dir / "ckpt" / "step_00000002" / "manifest.toml") << "step = 2\n";
  write_log(dir, 5, 8, true, [&] {
    CHECK(mt::log_left_open(dir.string()));
    {
      // A trainer holds the run's lock while it writes; the lock file's text names it.
      const mt::RunLock lock(dir.string());
      const std::string writer = mt::run_writer(dir.string());
      CHECK(writer.find("pid " + std::to_string(getpid()) + " on host ") == 0);
      CHECK(writer.find(" holds " + (dir / "lock").string()) != std::string::npos);
      const mt::RunSummary s = mt::summarize_run(dir.string(), 3);
      CHECK(s.status() == "running");
      CHECK(s.status_text() == "running (" + writer + "), at step 5 of 8");
    }
    // The lock file stays behind; without its holder, an open log means a killed trainer.
    CHECK(fs::exists(dir / "lock"));
    CHECK(mt::run_writer(dir.string()).empty());
    CHECK(mt::summarize_run(dir.string(), 3).status_text() ==
          "stopped at step 5 of 8 (its trainer was killed: log.h5 was left open)");
  });
  CHECK_FALSE(mt::log_left_open(dir.string()));
  CHECK(mt::run_writer(dir.string()).empty());
  const mt::RunSummary s = mt::summarize_run(dir.string(), 3);
  CHECK(s.name == "unit");
  CHECK(s.status() == "stopped");
  CHECK(s.status_text() == "stopped at step 5 of 8");
  CHECK(s.steps_done == 5);
  CHECK(s.tokens_per_step == 32);
  CHECK(s.loss_last == 5.0);
  CHECK(s.loss_smoothed == 6.0);  // 7, 6, 5
  CHECK(s.loss_best == 5.0);
  CHECK(s.loss_best_step == 5);
  CHECK(s.loss_best_smoothed == 6.0);
  CHECK(s.best_first_step == 3);
  CHECK(s.best_last_step == 5);
  CHECK(s.val_last == 8.5);
  CHECK(s.val_best == 7.5);
  CHECK(s.val_best_step == 2);
  CHECK(s.tokens_per_s == 350.0);  // median of 200..500; the first step's 1 tok/s left out
  CHECK(std::isnan(s.mfu));
  REQUIRE(s.imbalance.size() == 1);
  CHECK(s.imbalance[0].first == doctest::Approx(1.5));
  CHECK(s.checkpoints.complete == std::vector<long long>{2});
  CHECK(s.checkpoints.incomplete == std::vector<std::string>{"step_00000004.tmp"});
  write_log(dir, 8, 8, false, {});
  CHECK(mt::summarize_run(dir.string(), 3).status_text() == "complete");
  fs::remove_all(dir);
}

TEST_CASE("summarize_run: a log that holds no step yet") {
  const fs::path dir = fs::temp_directory_path() / "mt_inspect_empty";
  fs::remove_all(dir);
  fs::create_directories(dir);
  mt::RunFacts facts;
  facts.config_toml = "[training]\nsteps = 8\n";
  { mt::RunLog log((dir / "log.h5").string(), facts, 0); }
  const mt::RunSummary s = mt::summarize_run(dir.string(), 20);
  CHECK(s.rows == 0);
  CHECK(s.steps_done == 0);
  CHECK(s.status_text() == "stopped at step 0 of 8");
  CHECK(std::isnan(s.loss_last));
  CHECK(!s.has_eval);
  CHECK(s.imbalance.empty());
  fs::remove_all(dir);
}
