#pragma once
// A sweep's grid file: the experiment it varies, lists of values per config key ([grid]) and
// fixed overrides ([set]). Its runs are the cartesian product of the lists, each named after its
// values ("lr=0.003,aux_loss=none"), which is also its directory name.
//
//   experiment = "configs/tiny.toml"     # relative to the current directory, like data paths
//   name = "lr_x_balance"                # optional; default: the grid file's name without .toml
//   [grid]
//   "optimizer.lr" = [1e-3, 3e-3]
//   "model.moe.aux_loss" = ["none", "sequence"]
//   [set]
//   "training.steps" = 100
#include <string>
#include <vector>

namespace mt {

struct GridValue {
  std::string key;    // dotted config key
  std::string toml;   // the value as TOML, for --set
  std::string text;   // the value in run names and tables: readable and filesystem-safe
  std::string where;  // "grid.toml:6:1"
};

struct GridAxis {
  std::string key;
  std::string label;  // the key's last part ("lr"), or the whole key where two axes share it
  std::vector<GridValue> values;
};

struct Grid {
  std::string path, experiment, name;
  std::string experiment_where;  // where `experiment` is written
  std::vector<GridAxis> axes;    // in file order
  std::vector<GridValue> fixed;  // [set]
};

struct GridRun {
  std::string name;                      // "lr=0.003,aux_loss=none"
  std::string labels;                    // "lr=0.003 aux_loss=none", for progress lines
  std::vector<const GridValue*> values;  // one per axis
};

// Reads and checks the grid file; UserError naming the file, line and key on any mistake.
Grid load_grid(const std::string& path);
// The runs, first axis varying slowest.
std::vector<GridRun> grid_runs(const Grid& grid);
// A run's overrides as `--set` takes them ("optimizer.lr=0.003"): [set], then its grid values,
// then its name, the sweep directory as run.out_dir and checkpoint.resume = "auto".
std::vector<std::string> run_overrides(const Grid& grid, const GridRun& run, const std::string& sweep_dir);

}  // namespace mt
