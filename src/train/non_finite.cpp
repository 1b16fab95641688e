#include "train/non_finite.hpp"

#include <cmath>
#include <cstdio>
#include <utility>

#include "io/checkpoint.hpp"

namespace mt {

namespace {

// Why the run stops at `step`, what was kept, and how to continue from before the divergence:
// `kept` lists the complete checkpoints, newest first, each with its loss where this run logged it.
std::string message_for(long long step, double loss, double grad_norm,
                        const std::vector<std::pair<std::string, std::string>>& kept) {
  char what[96];
  if (!std::isfinite(loss)) std::snprintf(what, sizeof what, "the loss is %g", loss);
  else std::snprintf(what, sizeof what, "the gradient norm is %g (loss %.4f)", grad_norm, loss);
  std::string text = "step " + std::to_string(step) + ": " + what + "; this step was not applied or saved, and ";
  if (kept.empty())
    return text + "no checkpoint was written before it. Training is deterministic, so running the same command again "
                  "stops here again: lower optimizer.lr or set training.grad_clip (e.g. --set optimizer.lr=...), and "
                  "the run starts again from step 0";
  text += "the newest checkpoint, " + kept[0].first + ", is from before it" + kept[0].second +
          ". Training is deterministic, so running the same command again stops here again. With a lower optimizer.lr "
          "or training.grad_clip (e.g. --set optimizer.lr=...) the run continues from that checkpoint; but a loss "
          "often rises for many steps before it overflows, so it may already hold diverging weights";
  if (kept.size() == 1) return text + ": then start afresh with checkpoint.resume = \"never\" or a new run.name";
  std::string moves;
  for (size_t i = 0; i + 1 < kept.size(); ++i)
    moves += (i ? "; mv " : "mv ") + kept[i].first + " " + kept[i].first + ".diverged";
  return text + ". To continue from the oldest kept, " + kept.back().first + kept.back().second +
         ", move the newer ones out of the way (" + moves + ": only folders named step_<N> are resumed from) and run "
         "again with the lower optimizer.lr";
}

}  // namespace

std::string non_finite_message(const std::string& run_dir, long long step, double loss, double grad_norm,
                               long long first_step, const std::vector<double>& losses) {
  std::vector<std::pair<std::string, std::string>> kept;
  for (const std::string& dir : complete_checkpoints(run_dir)) {
    const long long at = checkpoint_step(dir) - first_step;  // its row in this run's losses
    char loss_text[64] = "";
    if (at >= 1 && at <= (long long)losses.size())
      std::snprintf(loss_text, sizeof loss_text, " (loss %.4f there)", losses[size_t(at - 1)]);
    kept.push_back({dir, loss_text});
  }
  return message_for(step, loss, grad_norm, kept);
}

}  // namespace mt
