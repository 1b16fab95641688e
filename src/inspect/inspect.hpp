#pragma once
// `moetrain inspect PATH...`: a run's summary, a comparison of several runs, or a checkpoint's
// contents, as text, JSON or CSV.
#include <cstddef>
#include <string>
#include <vector>

namespace mt {

struct InspectOptions {
  bool json = false, csv = false;
  size_t window = 20;  // steps the smoothed training loss averages over
};

// paths: run directories (holding log.h5) or checkpoint directories (holding rank_*.h5); a
// log.h5 or rank_*.h5 file stands for its directory. Runs and checkpoints are not mixed.
// UserError naming the path that is neither.
std::string inspect(const std::vector<std::string>& paths, const InspectOptions& options);

}  // namespace mt
