// `moetrain plot`: the charts of one or more runs as SVG files.
#include <cstdio>
#include <memory>

#include "cli/command.hpp"
#include "plot/plot.hpp"
#include "util/cli_checks.hpp"

namespace mt::cli {

namespace {

struct PlotArgs {
  std::vector<std::string> runs;
  std::string out;
  bool log_steps = false;
  long long smooth = -1;
};

int run_plot(const PlotArgs& a) {
  const mt::plot::PlotResult r = mt::plot::plot_runs(a.runs, a.out, a.log_steps, a.smooth);
  for (const std::string& note : r.notes) std::printf("plot: %s\n", note.c_str());
  for (const std::string& path : r.written) std::printf("plot: wrote %s\n", path.c_str());
  return 0;
}

}  // namespace

Command add_plot(CLI::App& app) {
  auto a = std::make_shared<PlotArgs>();
  CLI::App* plot =
      app.add_subcommand("plot", "Draw the charts of one or more runs (loss, lr, experts, phases) as SVG files");
  plot->add_option("runs", a->runs, "run directories holding log.h5, e.g. runs/tiny")->required();
  plot->add_option("--out", a->out, "directory for the SVG files (created if needed)")->required();
  plot->add_flag("--log-steps", a->log_steps, "log-scaled step axis");
  plot->add_option("--smooth", a->smooth,
                   "steps of the running mean drawn bold, the same for every run; 0 or 1: none (default: a 25th of "
                   "the longest run, none below 50 steps)")
      ->check(mt::whole_in(0, 1'000'000'000));
  return {plot, [a] { return run_plot(*a); }};
}

}  // namespace mt::cli
