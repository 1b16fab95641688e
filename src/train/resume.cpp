#include "train/resume.hpp"

#include <cstdio>

#include "comm/comm.hpp"

namespace mt {

namespace {

// The checkpoint's config is compared with this run's before anything is loaded: a changed model
// is a plain UserError, never damage to pass over.
Resumed check_and_load(const std::string& dir, const ModelState& model, const ResumingConfig& run) {
  const CheckpointRecord saved = read_checkpoint_record(dir);
  Resumed r{dir, {}, config_changes(saved.config_toml, dir + " (config_toml)", run.resolved_toml), saved.layout};
  refuse_model_changes(r.changes, dir, saved.step, run.origin);
  r.state = load_checkpoint(dir, model);
  return r;
}

}  // namespace

std::optional<Resumed> resume_checkpoint(const std::string& run_dir, const std::string& setting,
                                         const ModelState& model, const ResumingConfig& run, Comm& world) {
  if (setting == "never") return std::nullopt;
  if (setting != "auto") return check_and_load(setting, model, run);
  const std::vector<std::string> candidates = complete_checkpoints(run_dir);
  std::string newest_problem;
  for (size_t i = 0; i < candidates.size(); ++i) {
    std::string problem;
    Resumed r;
    try {
      r = check_and_load(candidates[i], model, run);
    } catch (const CheckpointDamaged& e) {
      problem = e.what();
    }
    // A damaged piece may lie in the part only some ranks read: all ranks move on together.
    std::vector<double> damaged{problem.empty() ? 0.0 : 1.0};
    world.all_reduce_sum(damaged);
    if (damaged[0] == 0) return r;
    if (newest_problem.empty()) newest_problem = problem.empty() ? candidates[i] + " is damaged" : problem;
    const std::string next = i + 1 < candidates.size()
                                 ? "resuming from the previous complete checkpoint " + candidates[i + 1] + " instead"
                                 : "no older complete checkpoint is left";
    if (!problem.empty())
      std::fprintf(stderr, "warning: %s%s; %s\n",
                   world.size() > 1 ? ("rank " + std::to_string(world.rank()) + ": ").c_str() : "", problem.c_str(),
                   next.c_str());
    else if (world.rank() == 0)
      std::fprintf(stderr, "warning: %s cannot be read on %.0f of %d ranks (their warnings say why); %s\n",
                   candidates[i].c_str(), damaged[0], world.size(), next.c_str());
  }
  if (candidates.empty()) return std::nullopt;
  throw UserError(run_dir + ": no checkpoint of this run can be read (the newest: " + newest_problem +
                  "); move the damaged ones aside, or set checkpoint.resume = \"never\" to start afresh");
}

}  // namespace mt
