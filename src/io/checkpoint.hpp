#pragma once
// Checkpoints: <run>/ckpt/step_<N>/ holds one rank_<R>.h5 per rank and manifest.toml. Each rank
// writes the parameters (and their AdamW moments) whose first copy it holds, by global name
// and index range (param_slices.hpp); rank 0 adds the model buffers, the step and the data
// position. Any layout reads any checkpoint of the same model: each rank assembles its slices
// from all files. A checkpoint is written into step_<N>.tmp/ and renamed when every rank is
// done, so a crash mid-write never damages an older one and a directory without
// manifest.toml is never resumed from. Every dataset carries a checksum and the files use
// HDF5's checksummed metadata, so damage is found when loading, not trained on.
#include <optional>
#include <string>

#include <vector>

#include "model/params.hpp"
#include "parallel/groups.hpp"
#include "util/error.hpp"

namespace mt {

struct TrainState {
  long long step = 0;            // optimizer steps completed
  long long samples_seen = 0;    // data position: sequences consumed from the training stream
  long long seed = 0;            // the run's seed; training draws no other random numbers
  // The learning-rate schedule's current cycle: warmup from step lr_start, cosine decay until lr_end
  // (train/lr_schedule.hpp). lr_end = 0: not recorded (a checkpoint of an older moetrain).
  long long lr_start = 0, lr_end = 0;
};

// A rank's part of the model: its parameters (their names, shapes and buffers), and their values
// and AdamW moments in the ParamStore's layout (whoever holds them: Optimizer::export_values).
struct ModelState {
  ParamStore& params;
  std::vector<float>& values;
  std::vector<float>& exp_avg;
  std::vector<float>& exp_avg_sq;
};

// What a checkpoint records about the run besides the model.
struct CheckpointFacts {
  std::string config_toml;
  std::string layout;  // layout_text() of the run that writes it
  int keep = 2;        // newest checkpoints kept
};

// A checkpoint that cannot be read: a file missing, truncated or failing its checksum, or a
// damaged manifest. (A readable checkpoint of another model is a plain UserError.)
struct CheckpointDamaged : UserError {
  using UserError::UserError;
};

// Collective over groups.world. The caller holds the run's lock (run_lock.hpp): rank 0 clears
// step_*.tmp/ directories that killed runs left behind.
void save_checkpoint(const std::string& run_dir, const ModelState& model, const TrainState& state,
                     const CheckpointFacts& facts, const ParallelGroups& groups);
// What a checkpoint says about the run that wrote it: its resolved config and layout, from the
// first rank file its manifest lists, and its step. CheckpointDamaged when that cannot be read; UserError when
// step_dir holds no manifest.toml (a write that did not complete).
struct CheckpointRecord {
  std::string config_toml, layout;
  long long step = 0;  // manifest.toml's
};
CheckpointRecord read_checkpoint_record(const std::string& step_dir);
// Fills this rank's slices (whole shapes must match) and returns the saved state.
TrainState load_checkpoint(const std::string& step_dir, const ModelState& model);
// <run_dir>/ckpt/step_<N>, N in eight digits.
std::string checkpoint_dir(const std::string& run_dir, long long step);
// The N of a directory name exactly as checkpoint_dir writes it (step_ and at least eight digits,
// no sign, no leading zeros beyond the eight); nullopt for any other name (step_backup/, step_5/,
// step_N.tmp/), which is never taken for a checkpoint.
std::optional<long long> checkpoint_name_step(const std::string& name);
// Complete checkpoint directories of a run (named by checkpoint_name_step, with a manifest),
// newest (highest step) first.
std::vector<std::string> complete_checkpoints(const std::string& run_dir);
// The step a checkpoint directory holds, read from its name; UserError for a name that is not
// a checkpoint's.
long long checkpoint_step(const std::string& step_dir);

}  // namespace mt
