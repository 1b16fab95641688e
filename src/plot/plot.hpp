#pragma once
// `moetrain plot RUN_DIR... --out DIR`: the charts of one or more runs' log.h5 as SVG files.
#include <string>
#include <vector>

namespace mt::plot {

struct PlotResult {
  std::vector<std::string> written;  // paths of the files written
  std::vector<std::string> notes;    // charts skipped and runs left out, with the reason
};

// UserError for a missing or unreadable log, when no run has a logged step, and for an --out
// directory that cannot be created or written. `smooth_window`: the steps of the running means, the
// same for every run; negative: default_smoothing_window of the longest run.
PlotResult plot_runs(const std::vector<std::string>& run_dirs, const std::string& out_dir, bool log_steps,
                     long long smooth_window = -1);

}  // namespace mt::plot
