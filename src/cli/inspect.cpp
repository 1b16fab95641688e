// `moetrain inspect`: a run's summary, several runs compared, or a checkpoint shown.
#include <cstdio>
#include <memory>

#include "cli/command.hpp"
#include "inspect/inspect.hpp"
#include "util/cli_checks.hpp"

namespace mt::cli {

namespace {

struct InspectArgs {
  std::vector<std::string> paths;
  mt::InspectOptions options;
};

}  // namespace

Command add_inspect(CLI::App& app) {
  auto a = std::make_shared<InspectArgs>();
  CLI::App* inspect = app.add_subcommand("inspect",
      "Summarize a run (or compare several, or show a checkpoint): progress, losses, speed, expert balance");
  inspect->add_option("paths", a->paths, "run directories (runs/tiny) or checkpoint directories "
                      "(runs/tiny/ckpt/step_00000300)")->required();
  CLI::Option* json = inspect->add_flag("--json", a->options.json, "print a JSON array, one object per run");
  inspect->add_flag("--csv", a->options.csv, "print CSV with a header row, one row per run")->excludes(json);
  inspect->add_option("--window", a->options.window, "steps the smoothed training loss averages over (default 20)")
      ->check(mt::whole_in(1, 1'000'000'000));
  return {inspect, [a] {
            std::fputs(mt::inspect(a->paths, a->options).c_str(), stdout);
            return 0;
          }};
}

}  // namespace mt::cli
