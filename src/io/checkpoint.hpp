#pragma once
// Checkpoints: <run>/ckpt/step_<N>/ holds rank_00000.h5 (parameters, AdamW moments, model
// buffers, step and data position) and manifest.toml. A checkpoint is written into
// step_<N>.tmp/ and renamed when complete, so a crash mid-write never damages an older one and
// a directory without manifest.toml is never resumed from.
#include <optional>
#include <string>

#include "model/params.hpp"

namespace mt {

struct TrainState {
  long long step = 0;            // optimizer steps completed
  long long samples_seen = 0;    // data position: sequences consumed from the training stream
  long long seed = 0;            // the run's seed; training draws no other random numbers
};

void save_checkpoint(const std::string& run_dir, const ParamStore& params, const TrainState& state,
                     const std::string& config_toml, int keep);
// Loads into `params` (shapes must match) and returns the saved state.
TrainState load_checkpoint(const std::string& step_dir, ParamStore& params);
// Newest complete checkpoint directory of a run, if any.
std::optional<std::string> newest_checkpoint(const std::string& run_dir);

}  // namespace mt
