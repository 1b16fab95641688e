#pragma once
// What `inspect` reports about checkpoints: the ones a run directory holds, and the contents of
// one checkpoint directory (layout: io/checkpoint.hpp).
#include <map>
#include <string>
#include <vector>

#include "inspect/flat_config.hpp"

namespace mt {

struct CheckpointList {
  std::vector<long long> complete;      // steps of ckpt/step_N/ with manifest.toml, ascending
  std::vector<std::string> incomplete;  // names of ckpt/step_* without it (step_N.tmp/: a write cut short)
};
CheckpointList list_checkpoints(const std::string& run_dir);

struct ArrayCount {
  long long arrays = 0, elements = 0, bytes = 0;
};

struct CheckpointSummary {
  std::string dir;
  bool complete = false;  // manifest.toml present
  long long step = 0, samples_seen = 0, world_size = 0, seed = 0, format_version = 0;
  std::string layout;
  FlatConfig config;
  std::vector<std::pair<std::string, long long>> files;  // rank files present and their sizes in bytes
  std::map<std::string, ArrayCount> groups;  // "params", "optim", "buffers": summed over the rank files
};

// dir holds rank_*.h5 (and manifest.toml when complete). UserError naming the file that is unreadable.
CheckpointSummary summarize_checkpoint(const std::string& dir);

}  // namespace mt
