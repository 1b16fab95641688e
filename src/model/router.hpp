#pragma once
// The MoE router of DeepSeek-V3 (report section 2.1.2):
//   s_i = sigmoid(x . e_i)          affinity to routed expert i (e_i: the router's row i)
//   selection: top_k of s_i + b_i   (b_i: balancing bias, for selection only; with n_groups > 1
//                                    only the topk_groups best groups, scored by the sum of their
//                                    two best biased affinities, are eligible)
//   g_i = route_scale * s_i / sum over the selected of s_j
// The bias is not trained by gradients: after each optimizer step it moves by +gamma for experts
// that got fewer tokens than the mean over the step and -gamma for those that got more.
// Optional balance loss alpha sum_i f_i P_i over a group of G tokens (eqs. 17-20):
// f_i = E/(K G) * tokens routed to i, P_i = mean over the group of s_i / sum_j s_j. The group is
// a sequence (DeepSeek-V3's complementary loss), a micro-batch, or the whole global batch
// (GShard-style). f counts the experts tokens were actually routed to and carries no gradient.
// The step's statistics (tokens per expert; for a global-batch loss the probability sums) live
// in device buffers of doubles, summed over data-parallel ranks by the trainer.
#include <string>

#include "config/config.hpp"
#include "model/layer_env.hpp"

namespace mt {

// What one micro-batch's routing keeps for its backward pass (device pointers into its arena).
struct Routing {
  int tokens = 0;
  const float* x = nullptr;
  float* scores = nullptr;   // [tokens, E] sigmoid affinities
  int* chosen = nullptr;     // [tokens, K] selected experts
  float* gates = nullptr;    // [tokens, K]
  double* f = nullptr;       // [groups, E] a sequence- or micro-batch-wise loss's f
  float aux_weight = 0;
  float* dlogits = nullptr;  // [tokens, E] gradient of the router logits
};

class Router {
 public:
  Router(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix);
  // Routes `tokens` rows of x [tokens, d_model]. aux_weight is the weight of one group's balance
  // loss in the objective; this micro-batch's part of it is added to *aux_sum (device memory; null:
  // not summed; nothing for global_batch, whose loss finish_global_balance() adds).
  // `recompute`: a repeat of a forward, which adds nothing to the step's statistics.
  void forward(Arena& arena, const float* x, int tokens, float aux_weight, Routing& r, double* aux_sum,
               bool recompute = false);
  // The tokens [first, first + count) of a routing.
  struct Rows {
    int first = 0, count = 0;
  };
  // dx += the gradient through the router from the gates' gradient dgate [tokens, K] and the
  // balance loss, for the tokens `of_dx` (dx holds those rows only).
  void backward_input(Arena& arena, Routing& r, const float* dgate, float* dx, Rows of_dx);
  void backward_weight(const Routing& r);

  // global_batch only: after every forward of the step (and the sum of the statistics over the
  // data-parallel group), fixes f and adds the balance loss over the step's `tokens` tokens to *sum
  // (device memory).
  void finish_global_balance(long tokens, double* sum);
  void reset_step_statistics();
  // The auxiliary-loss-free update from the step's load; once per optimizer step. `guard`: the
  // step's checks in device memory (BiasUpdateArgs), null: always.
  void update_bias(const double* guard);

  BalanceLoss balance() const { return balance_; }
  const Buffer& step_load() const { return load_; }         // [E] tokens routed to each expert
  const Buffer& step_prob_sums() const { return prob_sum_; }  // [E] global_batch only
  int weight, bias;  // the router's parameter [E, d_model] and its bias buffer [E]

 private:
  // Tokens per balance group for this micro-batch (0 when there is no balance loss).
  int group_size(int tokens) const;

  LayerEnv env_;
  int d_, seq_, experts_, top_k_, n_groups_, topk_groups_;
  float route_scale_, gamma_, alpha_;
  BalanceLoss balance_;
  Buffer load_, prob_sum_, global_f_;
  long global_tokens_ = 0;
};

}  // namespace mt
