#pragma once
// `moetrain sweep GRID.toml`: every run of a grid (sweep/grid.hpp) trained one after another, each
// as a child process of this binary, in <run.out_dir>/<sweep name>/<run name>/. Every run's config
// is checked before the first one starts. A complete run (a checkpoint at training.steps) is
// skipped and an interrupted one resumes from its newest checkpoint, so the same command finishes
// a sweep. A stop request ends the running training with a checkpoint and the sweep after it.
#include <string>

namespace mt {

// Prints a line per run as it starts and a table of all runs at the end. Returns the exit status:
// 0 when every run is complete, 1 when one failed, 130 when stopped by a signal.
int run_sweep(const std::string& grid_path);

}  // namespace mt
