#pragma once
// DeepSeek-V3 MoE FFN: shared experts on every token plus routed experts chosen per token.
//   s_i = sigmoid(x . e_i)              affinity to routed expert i (e_i: router centroid)
//   selection: top_k of s_i + b_i       (b_i: balancing bias, used for selection only; with
//                                        n_groups > 1 only the topk_groups best groups, scored
//                                        by the sum of their two best biased affinities)
//   g_i = route_scale * s_i / sum_{j selected} s_j
//   y = sum_shared FFN(x) + sum_{i selected} g_i FFN_i(x)
// The bias is not trained by gradients: after each optimizer step it moves by +gamma for
// experts that got fewer tokens than the mean over the step and -gamma for those that got more.
// Optional balance loss alpha sum_i f_i P_i over a group of G tokens (report eqs. 17-20):
// f_i = E/(K G) * tokens routed to i, P_i = mean over the group of s_i / sum_j s_j. The group is
// a sequence (DeepSeek-V3's complementary loss), a micro-batch, or the whole global batch
// (GShard-style). f_i counts the experts tokens were actually routed to and carries no gradient.
// A global-batch group needs every micro-batch's routing before any backward pass: the trainer
// runs all forwards, calls finish_global_balance(), then the backwards.
// Expert parallelism: a rank holds experts [ep_rank * E/ep, (ep_rank+1) * E/ep). Routing runs on
// the rank's own tokens; the (token, expert) rows go to the experts' ranks with an all-to-all-v
// (the per-expert counts travel first; the shared experts compute while the rows are on their
// way), come back the same way, and are combined where the tokens live. Every row is kept: no capacity limit, no dropping. Under tensor parallelism the
// MoE runs whole on each tensor-parallel rank, so an expert sees a token once per such rank.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/swiglu_ffn.hpp"

namespace mt {

class MoE {
 public:
  MoE(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix, int max_in_flight);
  // x, y: [batch*seq, d_model]. aux_weight is the weight of one group's balance loss in the
  // objective. Returns this micro-batch's contribution: aux_weight * sum over its groups of
  // alpha sum_i f_i P_i (0 for global_batch, whose loss finish_global_balance() returns).
  double forward(int slot, Arena& arena, const float* x, int batch, float* y, float aux_weight);
  // global_batch only: after every forward of the step, fixes f from the step's routing and
  // returns the balance loss over the step's `tokens` tokens.
  double finish_global_balance(long tokens);
  void backward_input(int slot, Arena& arena, const float* dy, float* dx);
  void backward_weight(int slot);

  // Tokens routed to each expert since the last reset (the load of the current step).
  const std::vector<double>& step_load() const { return step_load_; }
  void reset_step_load();
  // The step's statistics to sum over data-parallel ranks, in place: the load, then (for a
  // global-batch balance loss) the routing-probability sums.
  std::vector<double>& step_load_sums() { return step_load_; }
  std::vector<double>& step_prob_sums() { return step_prob_sum_; }
  // The auxiliary-loss-free update from step_load(); call once per optimizer step.
  void update_bias();
  float* bias() { return env_.params->buffer(bias_); }
  int n_experts() const { return n_experts_; }

  int router, shared_gate, shared_up, shared_down, expert_gate, expert_up, expert_down;

 private:
  // Where the rows of an expert-parallel exchange go. Rows leave grouped by (peer, expert) and
  // arrive grouped by (source, local expert); `local_of` maps an arriving row to its place among
  // this rank's rows grouped by (local expert, source).
  struct Dispatch {
    std::vector<int> send_values, recv_values;  // per peer, floats (rows * d_model)
    std::vector<int> local_begin;               // [local experts + 1] segments of the local rows
    std::vector<int> local_of;                  // [arriving rows]
    int rows_in = 0;
  };
  struct Saved {
    int rows = 0, batch = 0;
    const float* x = nullptr;
    float* scores = nullptr;       // [rows, E] sigmoid affinities
    int* chosen = nullptr;         // [rows, K] selected experts
    float* gates = nullptr;        // [rows, K]
    int* expert_begin = nullptr;   // [E+1] segment of each expert in the permuted rows
    int* perm_token = nullptr;     // [rows*K] token of each permuted row
    int* slot_row = nullptr;       // [rows*K] permuted row of (token, k)
    float* xe = nullptr;           // [rows*K, d] gathered inputs
    float* ye = nullptr;           // [rows*K, d] expert outputs (before gating)
    std::vector<SwigluSaved> experts;  // this rank's experts
    Dispatch dispatch;
    SwigluSaved shared;
    float aux_weight = 0;
    float* dlogits = nullptr;      // [rows, E] gradient of the router pre-activations
  };
  void plan_dispatch(const int* expert_begin, Dispatch& d) const;
  // Sends `rows` (source order) to the experts' ranks without waiting; finish_dispatch() waits
  // and returns them in local order.
  struct Arrival {
    float* rows = nullptr;
    std::unique_ptr<Request> request;
  };
  Arrival start_dispatch(Arena& arena, const Dispatch& d, const float* rows) const;
  float* finish_dispatch(Arena& arena, const Dispatch& d, Arrival& arrival) const;
  // The reverse: rows in local order back to their sources, written to `out` in source order.
  void return_rows(Arena& arena, const Dispatch& d, const float* local, float* out) const;
  // ye = expert(xe) for every permuted row of the micro-batch, wherever its expert lives;
  // `meanwhile` runs while the rows travel.
  void experts_forward(Saved& s, Arena& arena, const std::function<void()>& meanwhile);
  // dxe from dye, the same way.
  void experts_backward_input(Saved& s, Arena& arena, const float* dye, float* dxe,
                              const std::function<void()>& meanwhile);

  SwigluWeights expert_weights(int e) const;
  SwigluGrads expert_grads(int e) const;
  SwigluWeights shared_weights() const;
  void select(const float* scores, int rows, int* chosen, float* gates) const;
  // Tokens per balance group for this micro-batch (0 when there is no balance loss).
  int group_size(int rows) const;
  // f_i for tokens [begin, begin+size) from their routing.
  void group_load(const Saved& s, int begin, int size, std::vector<double>& f) const;

  LayerEnv env_;
  int d_, seq_, n_experts_, n_local_, top_k_, hidden_, n_shared_, shared_hidden_, n_groups_, topk_groups_;
  float route_scale_, gamma_, alpha_;
  std::string aux_kind_;
  int bias_;
  std::vector<double> step_load_;
  std::vector<double> step_prob_sum_;  // global_batch: sum over the step's tokens of s_i / sum_j s_j
  std::vector<double> global_f_;       // global_batch: f_i of the step, set by finish_global_balance
  long global_tokens_ = 0;
  std::vector<Saved> saved_;
};

}  // namespace mt
