#pragma once
// The planner's validation set: published training runs (model, accelerators, layout, what the
// publisher measured, with its source), each predicted by the step model with no per-run factor.
// `moetrain plan-check configs/published/runs.toml` prints every run's error and their
// distribution; tests/test_plan_published.cpp holds the distribution to its bound.
#include <string>
#include <vector>

#include "plan/cost_model.hpp"

namespace mt::plan {

struct PublishedRun {
  std::string name;
  std::string source;     // the paper, report or page, and where in it
  std::string group;      // "dense" or "moe", for the distribution by kind
  std::string origin;     // the source group (one paper table, repository file or benchmark release)
  std::string trainer;    // the software profile (configs/software/TRAINER.toml)
  std::string trainer_release;  // where the source states one, else empty
  bool calibration = false;  // a profile's efficiency was fitted to this run
  std::string model_name;
  ModelConfig model;
  Cluster cluster;        // the profile, sized to the run's accelerators, with the run's software profile
                          // and its own `software` table applied
  int global_batch = 0;   // sequences per step
  Layout layout;
  double step_s = 0;      // the published step time, or the one its throughput implies
};

// Reads a runs file; throws UserError naming the file, the position, the key and what is valid.
std::vector<PublishedRun> load_published_runs(const std::string& path);

struct CheckedRun {
  const PublishedRun* run = nullptr;
  Estimate estimate;
  double error = 0;       // predicted / published - 1
};

// Predicts every run. Throws UserError naming the run when the planner refuses its layout.
std::vector<CheckedRun> check_published_runs(const std::vector<PublishedRun>& runs);

// The family a run is summarized in: its trainer and its accelerator ("megatron H100 SXM").
std::string family_of(const PublishedRun& r);

// Share of runs with |error| <= bound.
double share_within(const std::vector<CheckedRun>& checked, double bound);

// One line per run (with `left_out`, each run's leave-one-source-out error beside its own), then
// the distribution of errors: over every run, over the runs no profile was fitted to, and by
// accelerator vendor, kind (dense or MoE) and precision.
std::string published_report(const std::vector<CheckedRun>& checked, const std::vector<double>& left_out = {});

}  // namespace mt::plan
