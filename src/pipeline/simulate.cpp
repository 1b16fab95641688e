// Event-free list scheduling: repeatedly start the next operation of any rank whose inputs are
// ready. Each operation's start time is fixed by data it already knows, so the sweep order over
// ranks does not change the result.
#include "pipeline/simulate.hpp"

#include <algorithm>
#include <stdexcept>

namespace mt::pipeline {

double Timeline::max_bubble() const { return bubble.empty() ? 0 : *std::max_element(bubble.begin(), bubble.end()); }

namespace {

double cost_of(const ComputeOp& op, const Costs& c) {
  if (op.overlapped_backward) return c.overlapped;
  switch (op.task.pass) {
    case Pass::forward: return c.forward;
    case Pass::backward: return c.backward;
    case Pass::input_grad: return c.input_grad;
    case Pass::weight_grad: return c.weight_grad;
  }
  return 0;
}

struct Produced {
  double time;
  int rank;
};

// The sweep: returns the makespan; `on_op(rank, op, start, end)` sees every operation as it is placed.
template <class OnOp>
double sweep(const Placement& pl, const RankOrders& order, const Costs& costs, OnOp on_op) {
  const int n = static_cast<int>(order.size());
  std::vector<size_t> next(n, 0);
  std::vector<double> clock(n, 0);
  // Where each rank's chunks sit, looked up once.
  std::vector<Location> where(size_t(n) * pl.chunks_per_rank);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < pl.chunks_per_rank; ++c) where[size_t(r) * pl.chunks_per_rank + c] = *pl.locate(r, c);
  auto locate = [&](int r, int chunk) { return where[size_t(r) * pl.chunks_per_rank + chunk]; };
  // When each transfer's data exists: indexed by payload, flow, micro-batch and position.
  const size_t per_payload = size_t(pl.flows) * pl.microbatches_per_flow * pl.stages;
  std::vector<Produced> produced(2 * per_payload, Produced{-1, -1});
  auto slot = [&](int payload, int flow, int mb, int position) -> Produced& {
    return produced[payload * per_payload + (size_t(flow) * pl.microbatches_per_flow + mb) * pl.stages + position];
  };

  // The earliest start of `op` on rank r, or a negative value while an input is missing.
  auto ready_at = [&](int r, const ComputeOp& op) {
    double t = clock[r];
    for_each_task(op, [&](const Task& task) {
      if (t < 0 || task.pass == Pass::weight_grad) return;
      const Location loc = locate(r, task.chunk);
      bool fwd = task.pass == Pass::forward;
      int from = fwd ? loc.position - 1 : loc.position + 1;
      if (from < 0 || from >= pl.stages) return;
      const Produced& p = slot(fwd ? 0 : 1, loc.flow, task.microbatch, from);
      t = p.rank < 0 ? -1.0 : std::max(t, p.time + (p.rank == r ? 0 : costs.latency));
    });
    return t;
  };

  size_t remaining = 0;
  for (const auto& ops : order) remaining += ops.size();
  while (remaining > 0) {
    bool progress = false;
    for (int r = 0; r < n; ++r) {
      while (next[r] < order[r].size()) {
        const ComputeOp& op = order[r][next[r]];
        double start = ready_at(r, op);
        if (start < 0) break;
        double end = start + cost_of(op, costs);
        on_op(r, op, start, end);
        clock[r] = end;
        for_each_task(op, [&](const Task& task) {
          if (task.pass == Pass::weight_grad) return;
          const Location loc = locate(r, task.chunk);
          slot(task.pass == Pass::forward ? 0 : 1, loc.flow, task.microbatch, loc.position) = {end, r};
        });
        ++next[r];
        --remaining;
        progress = true;
      }
    }
    if (!progress) throw std::logic_error("simulate: the schedule cannot make progress; run check_schedule first");
  }
  return *std::max_element(clock.begin(), clock.end());
}

}  // namespace

Timeline simulate(const Schedule& s, const Costs& costs) { return simulate(s.placement, compute_order(s), costs); }

Timeline simulate(const Placement& pl, const RankOrders& order, const Costs& costs) {
  const int n = static_cast<int>(order.size());
  Timeline tl;
  tl.ranks.resize(n);
  tl.busy.assign(n, 0);
  tl.makespan = sweep(pl, order, costs, [&](int r, const ComputeOp& op, double start, double end) {
    tl.ranks[r].push_back({op, start, end});
    tl.busy[r] += end - start;
  });
  for (int r = 0; r < n; ++r) tl.bubble.push_back(tl.makespan - tl.busy[r]);
  tl.peak_activations = peak_activations(order);
  return tl;
}

double simulate_makespan(const Placement& pl, const RankOrders& order, const Costs& costs) {
  return sweep(pl, order, costs, [](int, const ComputeOp&, double, double) {});
}

std::vector<int> peak_activations(const RankOrders& order) {
  std::vector<int> peaks;
  for (const auto& ops : order) {
    int live = 0, peak = 0;
    for (const ComputeOp& op : ops)
      for_each_task(op, [&](const Task& t) {
        if (t.pass == Pass::forward) peak = std::max(peak, ++live);
        if (t.pass == Pass::backward || t.pass == Pass::weight_grad) --live;
      });
    peaks.push_back(peak);
  }
  return peaks;
}

}  // namespace mt::pipeline
