#include "pipeline/transfers.hpp"

#include <map>

#include "util/error.hpp"

namespace mt::pipeline {

namespace {

struct Consumer {
  int rank;
  size_t op;
};

// The transfer a task needs (inputs) or produces (outputs) across positions, if any.
std::optional<Transfer> neighbour_transfer(const Placement& pl, int rank, const Task& t, bool inputs, int& peer) {
  if (t.pass == Pass::weight_grad) return std::nullopt;
  Location loc = *pl.locate(rank, t.chunk);
  bool forward = t.pass == Pass::forward;
  int step = forward ? 1 : -1;
  int other = inputs ? loc.position - step : loc.position + step;
  if (other < 0 || other >= pl.stages) return std::nullopt;
  peer = pl.slot(loc.flow, other).rank;
  if (peer == rank) return std::nullopt;
  return Transfer{forward ? Payload::activation : Payload::gradient, loc.flow, t.microbatch,
                  inputs ? other : loc.position};
}

}  // namespace

std::vector<std::vector<Step>> attach_transfers(const Placement& pl, const RankOrders& order) {
  const int n = static_cast<int>(order.size());
  Timeline tl = simulate(pl, order, Costs{});

  // Before compute operation k of each rank: posts, then sends of operation k-1's outputs, then
  // waits for operation k's inputs. Index order.size() holds what follows the last operation.
  struct Gap {
    std::vector<CommOp> posts, sends, waits;
  };
  std::vector<std::vector<Gap>> slots(n);
  for (int r = 0; r < n; ++r) slots[r].resize(order[r].size() + 1);

  std::map<TransferKey, Consumer> consumers;
  for (int r = 0; r < n; ++r)
    for (size_t k = 0; k < order[r].size(); ++k)
      for (const Task& t : tasks_of(order[r][k])) {
        int peer = -1;
        if (auto tr = neighbour_transfer(pl, r, t, true, peer)) {
          consumers[key_of(*tr)] = {r, k};
          slots[r][k].waits.push_back({CommKind::wait_recv, peer, *tr});
        }
      }

  for (int r = 0; r < n; ++r)
    for (size_t k = 0; k < order[r].size(); ++k)
      for (const Task& t : tasks_of(order[r][k])) {
        int peer = -1;
        auto tr = neighbour_transfer(pl, r, t, false, peer);
        if (!tr) continue;
        slots[r][k + 1].sends.push_back({CommKind::send, peer, *tr});
        const Consumer& c = consumers.at(key_of(*tr));
        MT_CHECK(c.rank == peer);
        // The receiver reaches the gap before its operation j when operation j-1 ends. Receives
        // from one sender are then posted in the order it sends, as NCCL's matching by order
        // needs: a later message is sent no earlier, and consumed by an operation that ends after
        // it is sent, so its gap is never before an earlier message's; within a gap, posts keep
        // this loop's order, the sender's.
        double sent_at = tl.ranks[r][k].end;
        size_t j = c.op;
        while (j > 0 && tl.ranks[c.rank][j - 1].end > sent_at) --j;
        slots[c.rank][j].posts.push_back({CommKind::post_recv, r, *tr});
      }

  std::vector<std::vector<Step>> programs(n);
  for (int r = 0; r < n; ++r)
    for (size_t k = 0; k < slots[r].size(); ++k) {
      for (auto* list : {&slots[r][k].posts, &slots[r][k].sends, &slots[r][k].waits})
        for (const CommOp& c : *list) programs[r].push_back(c);
      if (k < order[r].size()) programs[r].push_back(order[r][k]);
    }
  return programs;
}

}  // namespace mt::pipeline
