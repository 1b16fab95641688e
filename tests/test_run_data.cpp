// log.h5 as written by RunLog, read back by load_run (what inspect and plot see).
#include <doctest/doctest.h>

#include <filesystem>

#include "inspect/run_data.hpp"
#include "io/run_log.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;

namespace {
mt::StepRecord record(long long step, int moe_floats, int phase_floats) {
  mt::StepRecord r;
  r.step = step;
  r.loss = 5.0 - 0.5 * step;
  r.lr = 1e-3 * step;
  r.time_step = 0.25;
  for (int i = 0; i < moe_floats; ++i) {
    r.expert_load.push_back(float(step * 100 + i));
    r.expert_bias.push_back(float(-step * 100 - i));
  }
  for (int i = 0; i < phase_floats; ++i) r.rank_phases.push_back(float(step + 0.01 * i));
  return r;
}
}  // namespace

TEST_CASE("load_run reads back every series of log.h5, step by step") {
  const fs::path dir = fs::temp_directory_path() / "mt_run_data_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  mt::RunFacts facts;
  facts.config_toml = "[run]\nname = \"x\"\n";
  facts.numbers = {{"total_params", 1234.0}};
  facts.texts = {{"device", "cpu (test)"}};
  facts.moe_layers = 2;
  facts.experts = 3;
  facts.ranks = 2;
  {
    mt::RunLog log((dir / "log.h5").string(), facts, 0);
    for (long long s = 1; s <= 3; ++s) log.append(record(s, 6, 2 * mt::kPhases));
    log.append_eval(2, 4.5);
  }
  const mt::RunData run = mt::load_run(dir.string());
  CHECK(run.config_toml == facts.config_toml);
  CHECK(run.numbers.at("total_params") == 1234.0);
  CHECK(run.texts.at("device") == "cpu (test)");
  REQUIRE(run.steps == std::vector<long long>{1, 2, 3});
  CHECK(run.scalar("loss") == std::vector<double>{4.5, 4.0, 3.5});
  CHECK(run.scalar("lr")[2] == doctest::Approx(3e-3));
  CHECK(run.scalar("time/step")[0] == 0.25);
  REQUIRE(run.moe_layers == 2);
  REQUIRE(run.experts == 3);
  CHECK(run.load(2, 1, 2) == 305.0f);  // step 3, layer 1, expert 2: element 5 of that step
  CHECK(run.bias(0, 0, 1) == -101.0f);
  REQUIRE(run.ranks == 2);
  REQUIRE(run.phase_names.size() == size_t(mt::kPhases));
  CHECK(run.phase_names.front() == "compute");
  CHECK(run.phase(1, 1, 3) == doctest::Approx(2.0f + 0.01f * (mt::kPhases + 3)));
  CHECK(run.eval_steps == std::vector<long long>{2});
  CHECK(run.eval_loss == std::vector<double>{4.5});
  CHECK_THROWS_AS(run.scalar("nonexistent"), mt::UserError);
  fs::remove_all(dir);
}

TEST_CASE("load_run names the file when the log is missing or not HDF5") {
  const fs::path dir = fs::temp_directory_path() / "mt_run_data_bad";
  fs::remove_all(dir);
  fs::create_directories(dir);
  CHECK_THROWS_WITH_AS(mt::load_run(dir.string()), doctest::Contains("log.h5: no such file"), mt::UserError);
  std::FILE* f = std::fopen((dir / "log.h5").c_str(), "w");
  std::fputs("not hdf5", f);
  std::fclose(f);
  CHECK_THROWS_WITH_AS(mt::load_run(dir.string()), doctest::Contains("not a readable HDF5 file"), mt::UserError);
  fs::remove_all(dir);
}
