#pragma once
// A checkpoint's model on one rank, for the commands that use a trained model rather than train
// it (sample, export, dump-step --from): which checkpoint, its run's configuration, its values.
#include <string>

#include "config/config.hpp"
#include "io/checkpoint.hpp"
#include "model/model.hpp"

namespace mt {

// The newest complete checkpoint directory of a run; throws UserError when it has none.
std::string newest_checkpoint(const std::string& run_dir);
// The configuration the checkpoint was written with (its config_toml attribute).
Config checkpoint_config(const std::string& step_dir);
// Fills a one-rank model's parameters and buffers from a checkpoint of the same model (any layout
// wrote it); returns the checkpoint's training state.
TrainState load_model(Model& model, const std::string& step_dir);

}  // namespace mt
