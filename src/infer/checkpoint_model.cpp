#include "infer/checkpoint_model.hpp"

#include "config/stored_config.hpp"
#include "io/h5util.hpp"

namespace mt {

std::string newest_checkpoint(const std::string& run_dir) {
  const std::vector<std::string> checkpoints = complete_checkpoints(run_dir);
  if (checkpoints.empty())
    throw UserError(run_dir + ": no complete checkpoint (ckpt/step_*/manifest.toml): name a run directory that "
                    "training wrote a checkpoint into, e.g. runs/tiny");
  return checkpoints.front();
}

Config checkpoint_config(const std::string& step_dir) {
  h5::silence_errors();
  std::string toml;
  try {
    toml = h5::read_string_attr(h5::open_file(step_dir + "/rank_00000.h5", false), "config_toml");
  } catch (const h5::Failure& e) {
    throw UserError(step_dir + "/rank_00000.h5: cannot read the run's configuration: " + e.what());
  }
  return parse_config(upgrade_stored_config(toml), step_dir + " (config_toml)");
}

TrainState load_model(Model& model, const std::string& step_dir) {
  std::vector<float> values, exp_avg, exp_avg_sq;
  const TrainState state = load_checkpoint(step_dir, {model.params, values, exp_avg, exp_avg_sq});
  model.params.set_values(values);
  return state;
}

}  // namespace mt
