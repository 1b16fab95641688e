#pragma once
// The table a sweep ends with: one row per run, its grid values and what its log.h5 records (steps
// done, final train and eval loss, tokens/s). Kept apart so that `moetrain inspect`'s comparison
// table can take its place.
#include <string>
#include <vector>

namespace mt {

struct SweepRow {
  std::vector<std::string> values;  // one per grid axis
  std::string dir;                  // the run directory
  std::string status;               // "complete", "failed (exit 2)", ...
};

// Columns: the labels, steps, loss, eval_loss, tok/s (the median after the first step), status;
// "-" where a run has no log or no such value.
std::string sweep_table(const std::vector<std::string>& labels, const std::vector<SweepRow>& rows);

}  // namespace mt
