#pragma once
// The device counters of each training step (ops/backend/counters.hpp): what the whole step did,
// what its communicator's staging copies did apart, and what happened inside the step before its
// end (the download of the step's scalars for the log): that part and every pass of a
// micro-batch in it must make no host round trip once the first step has warmed the caches.
// With the capture check on, each step's regions are traced and compared with the step before's
// (ops/backend/capture_check.hpp). `train --profile` prints the counts; log.h5 keeps them.
#include <string>
#include <vector>

#include "ops/backend/capture_check.hpp"
#include "ops/backend/counters.hpp"

namespace mt {

struct StepCounts {
  Counts step;     // from the step's start to its record
  Counts staging;  // the staged communicator's copies in that time
  Counts in_step;  // from the step's start to its end mark
};

// The log's row of counters (run_log.hpp's kCounterNames order) and its op launches per kind.
std::vector<long long> counter_row(const StepCounts& c);
std::vector<long long> op_launch_row(const StepCounts& c);

class StepCounters {
 public:
  // `device` null: nothing is counted. `check` traces every step and compares it with the last.
  StepCounters(DeviceCounters* device, bool check, const CaptureRules& rules);
  ~StepCounters();
  StepCounters(const StepCounters&) = delete;
  StepCounters& operator=(const StepCounters&) = delete;

  void begin_step();
  // Where the step's scalars are read back: what follows is outside the step's region.
  void end_region();
  StepCounts end_step(long long step);

  // The capture check's verdict over the steps so far (the first only warms up); its downloads
  // and causes are the last step's.
  const CaptureReport& capture() const { return capture_; }
  long long checked_steps() const { return checked_; }
  // `train --profile`'s table: the first step, and the mean of the later ones.
  std::string profile_text() const;

 private:
  DeviceCounters* device_;
  bool check_;
  CaptureRules rules_;
  Counts at_begin_, staging_at_begin_;
  Counts in_step_;
  bool region_open_ = false;
  std::vector<Region> last_regions_;
  CaptureReport capture_;
  long long checked_ = 0;
  std::vector<StepCounts> profiled_;  // the first step's, then the sum of the later ones
  long long steps_ = 0;
};

}  // namespace mt
