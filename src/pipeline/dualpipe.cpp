// DualPipe and DualPipeV (DeepSeek-V3 report §3.2.1; github.com/deepseek-ai/DualPipe). Both run
// the same eight phases per rank with closed-form lengths; they differ in which chunk a phase
// drives and in those lengths. The phase names follow the reference implementation's step()
// comments: 0 and 1 are the rank's two chunks as seen from the rank.
#include <deque>

#include "pipeline/generators.hpp"

namespace mt::pipeline {

namespace {

struct PhaseLengths {
  int f0;          // 1: forwards of chunk 0 only
  int f0_f1;       // 2: F0 F1
  int i1_w_f1;     // 3: zero-bubble ramp-up: I1 W F1
  int main;        // 4: F0&B1 F1&B0
  int b1_f1b0;     // 5: B1 F1&B0
  int b1_b0;       // 6: B1 B0, the later half split into I and W
  int w_i0;        // 7: W I0
  int w;           // 8: W
  int turn_rank;   // 8-step index h of the rank's position; the ranks where the flow turns
  bool turn;       // run step 4's first pair unoverlapped (middle ranks of DualPipe, last of V)
};

class Builder {
 public:
  Builder(bool swap_chunks) : swap_(swap_chunks) {}

  void forward(int phase) { push(Pass::forward, chunk(phase), forwards_[chunk(phase)]++); }
  void backward(int phase, bool split) {
    int c = chunk(phase), m = backwards_[c]++;
    push(split ? Pass::input_grad : Pass::backward, c, m);
    if (split) deferred_.push_back({Pass::weight_grad, c, m});
  }
  void weight() {
    ops_.push_back(ComputeOp{deferred_.front(), std::nullopt});
    deferred_.pop_front();
  }
  void overlapped(int forward_phase, int backward_phase) {
    int fc = chunk(forward_phase), bc = chunk(backward_phase);
    ops_.push_back(ComputeOp{Task{Pass::forward, fc, forwards_[fc]++}, Task{Pass::backward, bc, backwards_[bc]++}});
  }
  std::vector<ComputeOp> take() { return std::move(ops_); }

 private:
  int chunk(int phase) const { return swap_ ? 1 - phase : phase; }
  void push(Pass p, int c, int m) { ops_.push_back(ComputeOp{Task{p, c, m}, std::nullopt}); }

  bool swap_;
  int forwards_[2] = {0, 0};
  int backwards_[2] = {0, 0};
  std::deque<Task> deferred_;
  std::vector<ComputeOp> ops_;
};

std::vector<ComputeOp> eight_steps(const PhaseLengths& n, bool swap_chunks) {
  Builder b(swap_chunks);
  for (int i = 0; i < n.f0; ++i) b.forward(0);
  for (int i = 0; i < n.f0_f1; ++i) {
    b.forward(0);
    b.forward(1);
  }
  for (int i = 0; i < n.i1_w_f1; ++i) {
    b.backward(1, true);
    b.weight();
    b.forward(1);
  }
  for (int i = 0; i < n.main; ++i) {
    if (i == 0 && n.turn) {
      b.forward(0);
      b.backward(1, false);
    } else {
      b.overlapped(0, 1);
    }
    b.overlapped(1, 0);
  }
  for (int i = 0; i < n.b1_f1b0; ++i) {
    b.backward(1, false);
    b.overlapped(1, 0);
  }
  // Splitting starts halfway through step 6 so that exactly b1_b0 backwards are split, matching
  // the b1_b0 W's of step 8; the parity of h decides whether the switch falls before B1 or B0.
  bool split = false;
  const int half = n.b1_b0 / 2, h = n.turn_rank;
  for (int i = 0; i < n.b1_b0; ++i) {
    if (i == half && h % 2 == 1) split = true;
    b.backward(1, split);
    if (i == half && h % 2 == 0) split = true;
    b.backward(0, split);
  }
  for (int i = 0; i < n.w_i0; ++i) {
    b.weight();
    b.backward(0, true);
  }
  for (int i = 0; i < n.w; ++i) b.weight();
  return b.take();
}

PhaseLengths lengths(int half_pipeline, int h, int main_steps, bool turn) {
  int before = half_pipeline - h - 1;
  return {2 * before, h + 1, before, main_steps, before, h + 1, before, h + 1, h, turn};
}

}  // namespace

std::vector<std::vector<ComputeOp>> dualpipe_order(int pp, int microbatches) {
  // Rank r holds stage r of the forward direction (chunk 0) and stage pp-1-r, which the reverse
  // direction reaches at rank r (chunk 1). Ranks of the second half mirror the first, so their
  // phase 0 drives chunk 1.
  std::vector<std::vector<ComputeOp>> ranks(pp);
  const int half = pp / 2;
  for (int r = 0; r < pp; ++r) {
    int h = std::min(r, pp - 1 - r);
    ranks[r] = eight_steps(lengths(half, h, microbatches / 2 - pp + h + 1, h == half - 1), r >= half);
  }
  return ranks;
}

std::vector<std::vector<ComputeOp>> dualpipev_order(int pp, int microbatches) {
  // 2*pp stages in a V: chunk 0 of rank r is stage r, chunk 1 is stage 2*pp-1-r.
  std::vector<std::vector<ComputeOp>> ranks(pp);
  for (int r = 0; r < pp; ++r)
    ranks[r] = eight_steps(lengths(pp, r, microbatches - 2 * pp + r + 1, r == pp - 1), false);
  return ranks;
}

}  // namespace mt::pipeline
