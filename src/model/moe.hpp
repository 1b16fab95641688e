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
// Optional sequence-wise balance loss (report eqs. 17-20), with f_i counted from the experts a
// token was actually routed to.
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/swiglu_ffn.hpp"

namespace mt {

class MoE {
 public:
  MoE(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix, int max_in_flight);
  // x, y: [batch*seq, d_model]. aux_grad_scale multiplies the balance loss's gradient.
  // Returns this micro-batch's balance loss (alpha * sum_i f_i P_i summed over its sequences).
  double forward(int slot, Arena& arena, const float* x, int batch, float* y, float aux_grad_scale);
  void backward_input(int slot, Arena& arena, const float* dy, float* dx);
  void backward_weight(int slot);

  // Tokens routed to each expert since the last reset (the load of the current step).
  const std::vector<double>& step_load() const { return step_load_; }
  void reset_step_load() { std::fill(step_load_.begin(), step_load_.end(), 0.0); }
  // The auxiliary-loss-free update from step_load(); call once per optimizer step.
  void update_bias();
  float* bias() { return env_.params->buffer(bias_); }
  int n_experts() const { return n_experts_; }

  int router, shared_gate, shared_up, shared_down, expert_gate, expert_up, expert_down;

 private:
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
    std::vector<SwigluSaved> experts;
    SwigluSaved shared;
    float aux_grad_scale = 0;
    float* dlogits = nullptr;      // [rows, E] gradient of the router pre-activations
  };
  SwigluWeights expert_weights(int e) const;
  SwigluGrads expert_grads(int e) const;
  SwigluWeights shared_weights() const;
  void select(const float* scores, int rows, int* chosen, float* gates) const;

  LayerEnv env_;
  int d_, seq_, n_experts_, top_k_, hidden_, n_shared_, shared_hidden_, n_groups_, topk_groups_;
  float route_scale_, gamma_, alpha_;
  int bias_;
  std::vector<double> step_load_;
  std::vector<Saved> saved_;
};

}  // namespace mt
