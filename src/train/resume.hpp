#pragma once
// Which checkpoint a run continues from. checkpoint.resume = "never" starts afresh; a directory
// loads that checkpoint or stops saying why; "auto" loads the newest complete checkpoint of the
// run that every rank can read, passing over damaged ones (a file truncated, missing or failing
// its checksum) with a warning that names the file and why. A readable checkpoint of another
// model stops the run in both cases: that is a changed config, not damage; so does a changed key
// that defines the model or its computation (resume_config.hpp), before anything is loaded.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "train/resume_config.hpp"

namespace mt {

class Comm;

struct Resumed {
  std::string dir;
  TrainState state;
  std::vector<ConfigChange> changes;  // keys this run sets otherwise than the checkpoint (all allowed)
  std::string layout;                 // the layout that wrote the checkpoint
};

// What the resuming run is: its resolved config and where each key was set.
struct ResumingConfig {
  const std::string& resolved_toml;
  const std::map<std::string, std::string>& origin;
};

// Collective over `world`: every rank loads its slices of the same checkpoint.
std::optional<Resumed> resume_checkpoint(const std::string& run_dir, const std::string& setting,
                                         const ModelState& model, const ResumingConfig& run, Comm& world);

}  // namespace mt
