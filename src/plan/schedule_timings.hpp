#pragma once
// Memoized schedule simulations for the layout search: compute orders depend only on the
// schedule request, and many layouts (ZeRO stages, for one) share both request and costs.
#include <map>
#include <tuple>

#include "pipeline/generators.hpp"
#include "pipeline/simulate.hpp"

namespace mt::plan {

class ScheduleTimings {
 public:
  struct Result {
    double makespan;
    int peak_live_chunks;  // the largest over ranks
  };
  // Requires a valid request.
  Result run(const pipeline::ScheduleRequest& req, const pipeline::Costs& costs);

 private:
  using RequestKey = std::tuple<int, int, int, int>;  // kind, pp, micro-batches, vpp
  struct Orders {
    pipeline::Placement placement;
    pipeline::RankOrders order;
    int peak_live_chunks;  // of the order, whatever the costs
  };
  std::map<RequestKey, Orders> orders_;
  std::map<std::tuple<RequestKey, double, double, double, double, double, double>, Result> results_;
};

}  // namespace mt::plan
