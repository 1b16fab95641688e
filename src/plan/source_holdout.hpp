#pragma once
// Leave-one-source-out validation of the published runs: each run predicted with every number
// fitted to its own source (paper table, repository file, benchmark release: the runs' `origin`)
// fitted again without it. The fitted numbers are the matrix-multiply efficiencies of the cluster
// profiles that have calibration runs, one per profile and precision.
#include <string>
#include <vector>

#include "plan/published.hpp"

namespace mt::plan {

// One fitted number: a profile's matmul efficiency in one precision, and the runs it was fitted to.
struct FittedNumber {
  std::string profile;  // the cluster profile's path
  bool fp8 = false;     // matmul_fp8, else matmul_bf16
  double shipped = 0;   // the profile's value
  double refit = 0;     // fitted here to the same runs (the median run predicted exactly)
  std::vector<const PublishedRun*> runs;
  std::string key() const { return fp8 ? "matmul_fp8" : "matmul_bf16"; }
};

// A software profile's matmul_factor, fitted to every published run of its trainer.
struct SoftwareFit {
  std::string trainer;
  double shipped = 0, refit = 0;
  std::vector<const PublishedRun*> runs;
};

struct HeldOutRun {
  double error = 0;     // predicted / published - 1, its source's fits redone without it
};

struct SourceHoldout {
  std::vector<FittedNumber> fitted;
  std::vector<SoftwareFit> software;
  std::vector<HeldOutRun> runs;      // in the order of the runs given
  std::vector<std::string> refits;   // per source left out: which number was fitted again, to what
};

// The median run of `runs` predicted exactly by the value of `fp8 ? matmul_fp8 : matmul_bf16`.
double fit_efficiency(const std::vector<const PublishedRun*>& runs, bool fp8);

// The factor on both matmul efficiencies at which the median of `runs` (one trainer's, its factor
// `shipped` applied) is predicted exactly.
double fit_software_factor(const std::vector<const PublishedRun*>& runs, double shipped);

SourceHoldout leave_one_source_out(const std::vector<PublishedRun>& runs);

// The held-out figures: the fitted numbers, the refits, and per family (family_of) the share
// within 20% and the median error, in sample and held out.
std::string holdout_report(const std::vector<CheckedRun>& in_sample, const SourceHoldout& h);

}  // namespace mt::plan
