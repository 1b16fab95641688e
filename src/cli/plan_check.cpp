// `moetrain plan-check`: the planner's prediction of every published run of a runs file, and its error.
#include <cstdio>
#include <memory>

#include "cli/command.hpp"
#include "plan/plan_report.hpp"
#include "plan/published.hpp"
#include "plan/source_holdout.hpp"

namespace mt::cli {

namespace {

struct PlanCheckArgs {
  std::string runs_file = "configs/published/runs.toml";
  bool breakdown = false;
};

int run_plan_check(const std::string& runs_file, bool breakdown) {
  using namespace mt::plan;
  const std::vector<PublishedRun> runs = load_published_runs(runs_file);
  std::printf("plan-check: %zu published runs of %s\n", runs.size(), runs_file.c_str());
  const std::vector<CheckedRun> checked = check_published_runs(runs);
  const SourceHoldout held = leave_one_source_out(runs);
  std::vector<double> left_out;
  for (const HeldOutRun& h : held.runs) left_out.push_back(h.error);
  std::printf("%s", published_report(checked, left_out).c_str());
  std::printf("%s", holdout_report(checked, held).c_str());
  if (breakdown) {
    std::vector<Estimate> rows;
    for (const CheckedRun& c : checked) rows.push_back(c.estimate);
    std::printf("\npredicted, run by run (numbered as above):\n%s", estimates_table(rows).c_str());
  }
  return 0;
}

}  // namespace

Command add_plan_check(CLI::App& app) {
  auto a = std::make_shared<PlanCheckArgs>();
  CLI::App* plan_check = app.add_subcommand(
      "plan-check", "Predict every published run of a runs file and print each error and their distribution");
  plan_check->add_option("runs", a->runs_file, "runs file (default configs/published/runs.toml)");
  plan_check->add_flag("--breakdown", a->breakdown, "also print each run's predicted time breakdown and layout");
  return {plan_check, [a] { return run_plan_check(a->runs_file, a->breakdown); }};
}

}  // namespace mt::cli
