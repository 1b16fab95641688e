#pragma once
// Software profiles (configs/software/NAME.toml): what a trainer overlaps, how much of the
// accelerator its all-to-all takes, whether it dispatches tokens in FP8, and its attention kernels.
// A profile sets only what holds for every release of its trainer, each number with its source;
// what it leaves out stays as the cluster profile's [software] table says (the software of that
// cluster's published runs), and a run's own `software` table overrides both.
#include <optional>
#include <string>
#include <vector>

#include "plan/cluster.hpp"

namespace mt::plan {

struct SoftwareProfile {
  std::string name;  // the trainer: one of software_names()
  std::string path;
  std::optional<bool> overlap_tp, overlap_dp, overlap_ep, fp8_dispatch, attention_materialized;
  std::optional<double> comm_sm_share;
  // The trainer's kernels against the cluster profile's (NVIDIA-tuned) matmul efficiencies, fitted
  // to the trainer's published runs (plan/source_holdout.cpp refits it without the left-out source).
  std::optional<double> matmul_factor;
  // c with what this profile sets; c.software names it.
  void apply_to(Cluster& c) const;
  // "overlap_tp=false fp8_dispatch=true ...": what it sets, for plan --explain.
  std::string settings() const;
};

// moetrain, megatron, torchtitan, maxtext, deepseek, other.
const std::vector<std::string>& software_names();

// The profile of trainer `name` in `dir` (dir/NAME.toml). Throws UserError naming the valid
// trainers when `name` is not one, and the file and key when the profile is malformed.
SoftwareProfile load_software(const std::string& dir, const std::string& name);

// For plan --explain: the software profile and what it set, then the cluster profile's fitted
// numbers the plan used.
std::string software_explained(const Cluster& c, const SoftwareProfile& p);

// Where `plan` finds the profiles: configs/software beside the cluster profile's folder, else
// configs/software under the working directory.
std::string software_dir_for(const std::string& cluster_path);

}  // namespace mt::plan
