#pragma once
// A run's record as `inspect` and `plot` read it back from <run>/log.h5 (layout: io/run_log.hpp).
// The log may still be growing (SWMR): its series are cut to the rows every one of them holds.
#include <map>
#include <string>
#include <vector>

namespace mt {

struct RunData {
  std::string dir;          // the run directory
  std::string config_toml;  // the resolved config the run was started with
  std::map<std::string, double> numbers;     // file attributes such as total_params, flops_per_token
  std::map<std::string, std::string> texts;  // file attributes such as device, layout
  std::vector<long long> steps;              // one entry per logged step
  std::map<std::string, std::vector<double>> scalars;  // "loss", "lr", "time/step", ...: one value per step
  std::vector<long long> eval_steps;
  std::vector<double> eval_loss;
  int moe_layers = 0, experts = 0;
  std::vector<float> expert_load, expert_bias;  // [step][moe layer][expert]
  int ranks = 0;
  std::vector<std::string> phase_names;  // compute, tp_comm, ...
  std::vector<float> rank_phases;        // [step][rank][phase] seconds

  const std::vector<double>& scalar(const std::string& name) const;
  // load or bias of (step index, moe layer, expert)
  float load(size_t step, int layer, int expert) const {
    return expert_load[(step * moe_layers + layer) * experts + expert];
  }
  float bias(size_t step, int layer, int expert) const {
    return expert_bias[(step * moe_layers + layer) * experts + expert];
  }
  float phase(size_t step, int rank, int phase) const {
    return rank_phases[(step * ranks + rank) * phase_names.size() + phase];
  }
};

// Reads <dir>/log.h5 (dir: a run directory). UserError naming the file when it is missing or damaged.
RunData load_run(const std::string& dir);

// The run directories (holding log.h5) directly inside dir, such as a sweep's folder or run.out_dir,
// sorted by path; empty when there are none. inspect and plot both take such a folder for its runs.
std::vector<std::string> runs_in_folder(const std::string& dir);

}  // namespace mt
