#pragma once
// What the trainer prints while it trains. In a terminal the step line is one line redrawn in
// place (carriage return, clear to the end of the line), cut to the terminal's width so it never
// wraps; eval results and checkpoint messages print on lines of their own above it. In a file, a
// pipe or under mpirun every report is a line of its own, as a log wants. The run ends with one
// `summary:` line of key=value fields for scripts.
#include <chrono>
#include <string>

#include "config/config.hpp"

namespace mt {

// Resolves "auto": in place when stdout is a terminal and mpirun did not start the process
// (mpirun may hand its ranks a pseudo-terminal while its own output goes to a file).
bool progress_in_place(ProgressMode mode);

std::string human_duration(double seconds);  // "45s", "1m14s", "2h05m"

struct StepReport {
  long long step = 0, steps = 0;  // done, and the run's total
  double loss = 0, aux_loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0, flops_per_s = 0;
  double mtp_loss = -1;  // < 0: the model has no MTP
  double mfu = -1;       // < 0: the device's peak is not known
  double eta_s = 0;
};
std::string step_text(const StepReport& r);

class Progress {
 public:
  Progress(ProgressMode mode, int every);
  ~Progress();  // ends a step line left open, so an error message starts on a line of its own
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Whether step `step` gets a step line: the first, every `every`-th and the last; in place also
  // any step a tenth of a second after the last redraw, so the line and its ETA stay live.
  bool due(long long step, bool final_step) const;
  void step(const std::string& text);
  void message(const std::string& text);  // a line of its own, above the step line
  void finish();                          // leaves the step line on screen and moves below it

 private:
  using Clock = std::chrono::steady_clock;
  void draw();
  bool in_place_;
  int every_;
  std::string shown_;  // the step line on screen (in place mode), empty when none
  Clock::time_point drawn_at_;
};

struct RunOutcome {
  std::string run;
  long long steps = 0;        // steps the run has done
  bool complete = false;      // reached training.steps
  bool interrupted = false;   // stopped by a signal (else, if not complete, by --stop-after)
  double loss = -1, eval_loss = -1;  // the last ones of this invocation; < 0: none
  double tokens_per_s = 0, elapsed_s = 0;
};
// "summary: run=<name> steps=<n> loss=<x> eval_loss=<x> tokens_per_s=<x> elapsed_s=<x>
// status=complete|stopped|interrupted"; a missing number is "nan".
std::string summary_line(const RunOutcome& o);

}  // namespace mt
