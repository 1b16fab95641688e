#pragma once
// Times a schedule from per-operation costs: each rank runs its compute operations in order,
// each starting when the rank is free and its inputs have arrived (a transfer between ranks
// takes `latency`; between chunks of one rank, nothing). Sends do not block the sender, as in an
// executor that posts non-blocking sends and completes them later.
#include <string>
#include <vector>

#include "pipeline/schedule.hpp"

namespace mt::pipeline {

// Per chunk operation, in any time unit.
struct Costs {
  double forward = 1;
  double backward = 2;    // full backward
  double input_grad = 1;  // I of a split backward
  double weight_grad = 1; // W of a split backward
  double overlapped = 3;  // one F&B pair
  double latency = 0;     // one point-to-point transfer
};

struct TimedOp {
  ComputeOp op;
  double start;
  double end;
};

struct Timeline {
  std::vector<std::vector<TimedOp>> ranks;
  double makespan = 0;
  std::vector<double> busy;    // per rank
  std::vector<double> bubble;  // per rank: makespan - busy
  std::vector<int> peak_activations;
  double max_bubble() const;
};

using RankOrders = std::vector<std::vector<ComputeOp>>;

// Requires a schedule whose data dependencies can all be met (check_schedule() accepts it);
// throws std::logic_error otherwise.
Timeline simulate(const Schedule& s, const Costs& costs);
Timeline simulate(const Placement& placement, const RankOrders& order, const Costs& costs);
// The same sweep's makespan alone, recording nothing (the planner runs thousands).
double simulate_makespan(const Placement& placement, const RankOrders& order, const Costs& costs);

// Live chunk activations per rank, counted in program order: a forward adds one, freed by its
// full backward or, for a split backward, by its W. In an F&B pair the new activation is
// counted before the backward frees the old one.
std::vector<int> peak_activations(const RankOrders& order);

}  // namespace mt::pipeline
