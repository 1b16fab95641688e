#pragma once
// The charts of `moetrain plot`, each one SVG file drawn from the logs of one or more runs.
// A chart that does not apply to the runs (no experts, one rank) comes back with `skipped` set.
#include <string>
#include <vector>

#include "inspect/run_data.hpp"

namespace mt::plot {

struct Run {
  std::string name;  // legend label
  RunData data;
};

struct Chart {
  std::string file;     // "loss.svg"
  std::string svg;      // empty when skipped
  std::string skipped;  // why it does not apply
};

// Training loss of every run (each step light, its running mean over `window` steps bold; 0 or 1: no
// running mean), validation loss as dots.
Chart loss_chart(const std::vector<Run>& runs, bool log_steps, long long window);
// One logged scalar of every run ("lr", "grad_norm", ...), smoothed like the loss.
Chart scalar_chart(const std::vector<Run>& runs, const std::string& series, const std::string& title,
                   const std::string& y_label, long long window, bool log_steps, bool log_y = false);
// Per run, a heatmap of each MoE layer's expert load over the steps.
Chart expert_load_chart(const std::vector<Run>& runs);
// The balancing bias of every expert over the steps, a panel per run and MoE layer.
Chart expert_bias_chart(const std::vector<Run>& runs, bool log_steps);
// Runs of several ranks: per rank, the mean step time split by phase, stacked.
Chart phases_chart(const std::vector<Run>& runs);

}  // namespace mt::plot
