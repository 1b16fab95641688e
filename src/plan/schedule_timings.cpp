#include "plan/schedule_timings.hpp"

#include <algorithm>

namespace mt::plan {

ScheduleTimings::Result ScheduleTimings::run(const pipeline::ScheduleRequest& req, const pipeline::Costs& c) {
  const RequestKey rk{static_cast<int>(req.kind), req.pp, req.microbatches, req.vpp};
  const auto key = std::make_tuple(rk, c.forward, c.backward, c.input_grad, c.weight_grad, c.overlapped, c.latency);
  if (auto hit = results_.find(key); hit != results_.end()) return hit->second;
  auto it = orders_.find(rk);
  if (it == orders_.end()) {
    Orders o{pipeline::placement_for(req), pipeline::compute_order_for(req), 0};
    const std::vector<int> peaks = pipeline::peak_activations(o.order);
    o.peak_live_chunks = *std::max_element(peaks.begin(), peaks.end());
    it = orders_.emplace(rk, std::move(o)).first;
  }
  Result r{pipeline::simulate_makespan(it->second.placement, it->second.order, c), it->second.peak_live_chunks};
  results_.emplace(key, r);
  return r;
}

}  // namespace mt::plan
