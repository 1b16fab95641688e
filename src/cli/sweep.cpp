// `moetrain sweep`: every run of a grid, one process after another.
#include <memory>

#include "cli/command.hpp"
#include "sweep/sweep.hpp"
#include "util/error.hpp"

namespace mt::cli {

Command add_sweep(CLI::App& app, Comm* world) {
  auto grid = std::make_shared<std::string>();
  CLI::App* sweep = app.add_subcommand("sweep",
      "Train every run of a grid of config values, one after another: complete runs are skipped, "
      "interrupted ones resumed; ends with a table of the runs");
  sweep->add_option("grid", *grid, "grid file, e.g. configs/sweeps/lr_x_balance.toml")->required();
  return {sweep, [grid, world] {
            if (world)
              throw mt::UserError("sweep: start it without mpirun; it trains each run as a process of its own");
            return mt::run_sweep(*grid);
          }};
}

}  // namespace mt::cli
