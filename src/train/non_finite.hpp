#pragma once
// The message of a run stopped by a loss or gradient norm that is not finite.
#include <string>
#include <vector>

namespace mt {

// Why the run stops at `step` (1-based, not applied), what checkpoints of `run_dir` were kept
// (with the loss this run logged there: `losses` of the steps after `first_step`), and how to
// continue from before the divergence.
std::string non_finite_message(const std::string& run_dir, long long step, double loss, double grad_norm,
                               long long first_step, const std::vector<double>& losses);

}  // namespace mt
