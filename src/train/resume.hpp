#pragma once
// Which checkpoint a run continues from. checkpoint.resume = "never" starts afresh; a directory
// loads that checkpoint or stops saying why; "auto" loads the newest complete checkpoint of the
// run that every rank can read, passing over damaged ones (a file truncated, missing or failing
// its checksum) with a warning that names the file and why. A readable checkpoint of another
// model stops the run in both cases: that is a changed config, not damage.
#include <optional>
#include <string>

#include "io/checkpoint.hpp"

namespace mt {

class Comm;

struct Resumed {
  std::string dir;
  TrainState state;
};

// Collective over `world`: every rank loads its slices of the same checkpoint.
std::optional<Resumed> resume_checkpoint(const std::string& run_dir, const std::string& setting,
                                         const ModelState& model, Comm& world);

}  // namespace mt
