#pragma once
// SIGINT, SIGTERM or SIGUSR1 while training: the loop finishes the step, writes a checkpoint and
// stops. The handlers are installed for the lifetime of a StopSignals.
namespace mt {

class StopSignals {
 public:
  // `notice`: this rank writes at once what happens next (the first rank); `final_checkpoint`:
  // whether a checkpoint follows the step.
  StopSignals(bool notice, bool final_checkpoint);
  ~StopSignals();  // the handlers from before
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // Whether a signal arrived on this rank.
  static bool requested();

 private:
  using Handler = void (*)(int);
  Handler old_int_, old_term_, old_usr1_;
};

}  // namespace mt
