#pragma once
// What a resumed run may change. The checkpoint's config (its config_toml attribute) against
// this run's: keys that only say how the run is laid out, logged, checkpointed, how long it
// trains and how fast it learns may change (and log.h5 records each change at the resumed
// step); every other key defines the model or its computation, and a change stops the run
// before anything is loaded. docs/resume.md lists the decision for each key.
#include <map>
#include <string>
#include <vector>

namespace mt {

struct ConfigChange {
  std::string key, before, after;  // values as TOML writes them; before: the checkpoint's
};

// Whether `key` may differ between a checkpoint of `step` and the run that resumes from it. A
// checkpoint of step 0 (`moetrain import`'s) has computed nothing yet: any key may change (a
// fine-tune's seq_len, balance loss, optimizer), and loading still refuses other shapes.
bool may_change_on_resume(const std::string& key, long long step);

// The keys whose values differ, in key order; a key the checkpoint's config lacks (an older
// moetrain) is not compared. UserError naming `saved_source` when saved_toml is not TOML.
std::vector<ConfigChange> config_changes(const std::string& saved_toml, const std::string& saved_source,
                                         const std::string& current_toml);

// UserError naming each change that may_change_on_resume refuses, with both values, where this
// run sets it (`origin`: key -> "file:line:col", "--set k=v" or "default") and what to do.
void refuse_model_changes(const std::vector<ConfigChange>& changes, const std::string& checkpoint, long long step,
                          const std::map<std::string, std::string>& origin);

// "step 40: optimizer.lr 0.003 -> 0.001, training.steps 40 -> 80" (empty without changes).
std::string changes_line(long long step, const std::vector<ConfigChange>& changes);

}  // namespace mt
