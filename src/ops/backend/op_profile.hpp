#pragma once
// Where a step's device time goes, by op kind: a backend that forwards every op to another and
// times each kind with a DeviceTimer (CUDA events on a GPU, so an op's time is the time the stream
// spent in it). `moetrain train --profile` hands it to the model and prints the table at the end.
#include <memory>
#include <string>
#include <vector>

#include "ops/ops.hpp"

namespace mt {

struct OpKindTime {
  std::string name;
  long long calls = 0;
  double seconds = 0;
  double flops = 0;  // counted for the GEMM and attention ops, else 0
  double bytes = 0;  // the least memory traffic of the memory-bound ops, else 0
};

class OpProfile {
 public:
  explicit OpProfile(const Backend& inner);
  ~OpProfile();
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  // The backend to compute with: the inner one's results, timed. One thread at a time.
  const Backend& backend() const { return profiled_; }
  // Every op kind called since the last take(), in table order; waits for the device.
  std::vector<OpKindTime> take();

  struct State;

 private:
  std::unique_ptr<State> state_;
  Backend profiled_;
};

// Adds `more` to `sum` kind by kind (both in table order, or sum empty).
void add_op_times(std::vector<OpKindTime>& sum, const std::vector<OpKindTime>& more);
// The table of `moetrain train --profile`: per step (`total` over `steps` steps), most time first,
// with each kind's share of the op time and its rate where its FLOPs are known.
std::string op_profile_table(std::vector<OpKindTime> total, int steps);

}  // namespace mt
