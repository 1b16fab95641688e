#pragma once
// Whether a step could be captured once and replayed (a CUDA graph): compared with the step before
// it, every region (a pass of a micro-batch; the step's own ops outside them) runs the same ops
// with the same argument words (sizes, pointers, factors) on the same streams, and none waits
// for, reads from or allocates on the device. The regions come from DeviceCounters with tracing.
#include <map>
#include <string>
#include <vector>

#include "ops/backend/counters.hpp"

namespace mt {

struct CaptureRules {
  // Downloads allowed inside the passes (the expert-parallel exchange of counts), not in the
  // step's own region: each step must make the same number, and the op sequences are not
  // compared (their sizes follow the routing).
  bool exchange_downloads = false;
  std::string step_region = "step";
  size_t most_problems = 8;  // the problems listed; more are counted
};

struct CaptureReport {
  std::vector<std::string> problems;  // at most most_problems
  long long more = 0;                 // problems not listed
  long long downloads = 0;            // inside the passes of `now`
  // Every problem by its cause ("download after gather_rows", "other arguments: gemm"), counted.
  std::map<std::string, long long> causes;
  // The ops of `now`'s step region (after the passes: the gradient sums and the update), by kind,
  // when they were compared with the step before's.
  std::map<std::string, long long> step_ops;
  bool ok() const { return problems.empty(); }
};

// `now`'s regions against `before`'s (the previous step's); `step` names `now` in the problems.
// `before` empty (the first step): only the round trips are checked.
CaptureReport check_capture(const std::vector<Region>& before, const std::vector<Region>& now, long long step,
                            const CaptureRules& rules = {});

// An op of a trace as text: its kind and its first argument words.
std::string trace_op_text(const TraceOp& op);

}  // namespace mt
