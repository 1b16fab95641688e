// The single-direction schedules: GPipe, 1F1B (PipeDream-Flush), Megatron's interleaved 1F1B and
// ZB-H1 (zero bubble with 1F1B's activation memory; Qi et al. 2023, arXiv 2401.10241).
#include <algorithm>
#include <deque>

#include "pipeline/generators.hpp"

namespace mt::pipeline {

namespace {

ComputeOp op(Pass pass, int chunk, int microbatch) { return ComputeOp{Task{pass, chunk, microbatch}, std::nullopt}; }

}  // namespace

std::vector<std::vector<ComputeOp>> gpipe_order(int pp, int microbatches) {
  std::vector<std::vector<ComputeOp>> ranks(pp);
  for (auto& ops : ranks) {
    for (int m = 0; m < microbatches; ++m) ops.push_back(op(Pass::forward, 0, m));
    for (int m = 0; m < microbatches; ++m) ops.push_back(op(Pass::backward, 0, m));
  }
  return ranks;
}

std::vector<std::vector<ComputeOp>> one_f_one_b_order(int pp, int microbatches) {
  std::vector<std::vector<ComputeOp>> ranks(pp);
  for (int r = 0; r < pp; ++r) {
    // Rank r runs pp-r-1 forwards ahead, so at most pp-r micro-batches are ever in flight.
    int warmup = std::min(pp - r - 1, microbatches);
    int f = 0, b = 0;
    while (f < warmup) ranks[r].push_back(op(Pass::forward, 0, f++));
    while (f < microbatches) {
      ranks[r].push_back(op(Pass::forward, 0, f++));
      ranks[r].push_back(op(Pass::backward, 0, b++));
    }
    while (b < microbatches) ranks[r].push_back(op(Pass::backward, 0, b++));
  }
  return ranks;
}

std::vector<std::vector<ComputeOp>> interleaved_order(int pp, int microbatches, int vpp) {
  // Megatron's order: the k-th forward on a rank takes pp micro-batches through one chunk before
  // moving to the next chunk; backwards visit the chunks in reverse.
  auto forward_task = [&](int k) {
    return op(Pass::forward, (k / pp) % vpp, (k / (pp * vpp)) * pp + k % pp);
  };
  auto backward_task = [&](int k) {
    return op(Pass::backward, vpp - 1 - (k / pp) % vpp, (k / (pp * vpp)) * pp + k % pp);
  };
  const int total = microbatches * vpp;
  std::vector<std::vector<ComputeOp>> ranks(pp);
  for (int r = 0; r < pp; ++r) {
    int warmup = microbatches == pp ? total : std::min((pp - r - 1) * 2 + (vpp - 1) * pp, total);
    int f = 0, b = 0;
    while (f < warmup) ranks[r].push_back(forward_task(f++));
    while (f < total) {
      ranks[r].push_back(forward_task(f++));
      ranks[r].push_back(backward_task(b++));
    }
    while (b < total) ranks[r].push_back(backward_task(b++));
  }
  return ranks;
}

std::vector<std::vector<ComputeOp>> zb_h1_order(int pp, int microbatches) {
  // 1F1B with the backward split into I and W. Rank r holds back its last r weight gradients:
  // 1F1B leaves r activations of headroom on rank r below rank 0's peak of pp, so deferring
  // W keeps the peak at pp while the I chain returns gradients to rank 0 sooner. The deferred
  // W's fill the cool-down, where 1F1B waits.
  std::vector<std::vector<ComputeOp>> ranks(pp);
  for (int r = 0; r < pp; ++r) {
    auto& ops = ranks[r];
    int warmup = std::min(pp - r - 1, microbatches);
    int f = 0, b = 0;
    std::deque<int> deferred;
    auto input_grad = [&] {
      ops.push_back(op(Pass::input_grad, 0, b));
      deferred.push_back(b++);
      if (static_cast<int>(deferred.size()) > r) {
        ops.push_back(op(Pass::weight_grad, 0, deferred.front()));
        deferred.pop_front();
      }
    };
    while (f < warmup) ops.push_back(op(Pass::forward, 0, f++));
    while (f < microbatches) {
      ops.push_back(op(Pass::forward, 0, f++));
      input_grad();
    }
    while (b < microbatches) input_grad();
    for (int m : deferred) ops.push_back(op(Pass::weight_grad, 0, m));
  }
  return ranks;
}

}  // namespace mt::pipeline
