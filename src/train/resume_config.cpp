#include "train/resume_config.hpp"

#include <algorithm>

#include "inspect/flat_config.hpp"
#include "util/error.hpp"

namespace mt {

namespace {

// Keys (or sections, ending in '.') a resume may change: none of them alters the model or the
// arithmetic of the update other than its step size (micro_batch, recompute, the head's chunks and
// the layout reorder the sums, as any layout does). The data keys change what the rest of the run
// reads: other shards, or with data.shuffle the order from the resumed sequence on; config_changes
// records it.
const char* const kMayChange[] = {
    "run.name", "run.out_dir", "data.", "training.steps", "training.micro_batch", "model.head_chunk_tokens",
    "training.grad_clip", "training.eval_every", "training.eval_sequences", "training.recompute", "optimizer.lr",
    "optimizer.muon.lr", "lr_schedule.", "parallel.", "precision.device", "precision.attention",
    "precision.peak_tflops", "checkpoint.", "log.",
};

}  // namespace

bool may_change_on_resume(const std::string& key, long long step) {
  if (step == 0) return true;
  return std::any_of(std::begin(kMayChange), std::end(kMayChange), [&](const std::string& k) {
    return k.back() == '.' ? key.rfind(k, 0) == 0 : key == k;
  });
}

std::vector<ConfigChange> config_changes(const std::string& saved_toml, const std::string& saved_source,
                                         const std::string& current_toml) {
  const FlatConfig saved = flatten_config(saved_toml, saved_source);
  const FlatConfig now = flatten_config(current_toml, "the run's resolved config");
  std::vector<ConfigChange> out;
  for (const auto& [key, value] : now) {
    const auto it = saved.find(key);
    if (it != saved.end() && (it->second.kind != value.kind || it->second.text != value.text))
      out.push_back({key, it->second.text, value.text});
  }
  return out;
}

void refuse_model_changes(const std::vector<ConfigChange>& changes, const std::string& checkpoint, long long step,
                          const std::map<std::string, std::string>& origin) {
  std::string list;
  int refused = 0;
  for (const ConfigChange& c : changes) {
    if (may_change_on_resume(c.key, step)) continue;
    const auto where = origin.find(c.key);
    list += std::string(refused++ ? "; " : "") + c.key + " = " + c.after + " (" +
            (where != origin.end() ? where->second : "this run") + "), the checkpoint's is " + c.before;
  }
  if (refused == 0) return;
  throw UserError(checkpoint + ": cannot resume with a changed model or computation: " + list +
                  ". Set " + (refused > 1 ? "these keys" : "it") +
                  " back to the checkpoint's value to continue this run, or give the changed run a new run.name "
                  "(or checkpoint.resume = \"never\") to train it from the start (docs/resume.md lists what may "
                  "change)");
}

std::string changes_line(long long step, const std::vector<ConfigChange>& changes) {
  std::string line;
  for (const ConfigChange& c : changes)
    line += (line.empty() ? "step " + std::to_string(step) + ": " : ", ") + c.key + " " + c.before + " -> " + c.after;
  return line;
}

}  // namespace mt
