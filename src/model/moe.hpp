#pragma once
// DeepSeek-V3 MoE FFN: shared experts on every token plus routed experts chosen per token,
//   y = sum_shared FFN(x) + sum over the token's selected experts i of g_i FFN_i(x).
// Three parts, each in its own file: the Router (scores, selection, gates, balance loss, bias),
// the TokenDispatcher (rows grouped by expert, all-to-all under expert parallelism) and the
// grouped experts (one grouped GEMM per projection for all of a layer's experts). The shared
// experts compute on the layer's side stream (LayerEnv::side), beside the routing, the exchange
// and the routed experts, and join before the gated sum; without one they run while the routed
// rows travel. Under tensor parallelism every rank routes all of the micro-batch's tokens (the
// router is small, and its loss and statistics stay whole), but sends only its 1/tp share of them
// to the experts, shared and routed; the shares' outputs, and in backward their input and gate
// gradients, are all-gathered over the tensor-parallel group. So each token meets its experts once.
// With sequence parallelism the share is the rank's own rows of the block: its output and input
// gradient stay there, and only the gates' gradient is gathered for the router.
// A global-batch balance loss needs every micro-batch's routing before any backward pass: the
// trainer runs all forwards, calls finish_global_balance(), then the backwards.
#include <functional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/grouped_experts.hpp"
#include "model/router.hpp"
#include "model/swiglu_ffn.hpp"
#include "model/token_dispatch.hpp"

namespace mt {

class MoE {
 public:
  MoE(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix, int max_in_flight);
  // x: [batch*seq, d_model]; y the same, or this rank's share of the rows under sequence
  // parallelism (ShardPlace::split_rows), as dy and dx in backward_input. aux_weight is the weight of one group's
  // balance loss in the objective. Adds this micro-batch's contribution, aux_weight * sum over its groups of alpha
  // sum_i f_i P_i, to *aux_sum (device memory; null: not summed; nothing for global_batch, whose loss
  // finish_global_balance() adds). `recompute`: a repeat of this micro-batch's forward, which adds nothing to the
  // step's load. The experts' SwiGLU products go to `redo` (see swiglu_forward).
  void forward(int slot, Arena& arena, Arena& redo, const float* x, int batch, float* y, float aux_weight,
               double* aux_sum, bool recompute = false);
  // Selective recomputation: the SwiGLU products again, in `redo`; x is the input's recomputed copy.
  void redo(int slot, Arena& redo, const float* x);
  void finish_global_balance(long tokens, double* sum) { router_.finish_global_balance(tokens, sum); }
  // dy_codes: dy's FP8 codes (codes null: none), which the shared experts' down projection reads.
  void backward_input(int slot, Arena& arena, const float* dy, float* dx, const Fp8Codes& dy_codes = {});
  bool has_shared() const { return n_shared_ > 0; }
  void backward_weight(int slot);

  Router& router() { return router_; }
  int n_experts() const { return n_experts_; }
  int shared_gate, shared_up, shared_down, expert_gate, expert_up, expert_down;

 private:
  struct Saved {
    int rows = 0;
    int first = 0, share = 0;  // this tensor-parallel rank's tokens: rows [first, first + share)
    Routing routing;
    DispatchSaved dispatch;
    float* ye = nullptr;  // [rows*K, d] expert outputs before gating, permuted order
    GroupedExpertsSaved experts;
    SwigluSaved shared;
  };
  GroupedExpertWeights expert_weights() const;
  SwigluWeights shared_weights() const;

  // Whether the shares' outputs and input gradients are gathered into whole rows.
  bool gathered() const { return tp_ > 1 && !env_.shard.split_rows(); }
  // Runs the shared experts' part of a pass (or y = 0 without them) beside `routed`, the rest.
  void beside_shared(const std::function<void()>& shared,
                     const std::function<void(const std::function<void()>&)>& routed);

  LayerEnv env_;
  LayerEnv shared_env_;  // env_ on the side stream, when there is one
  int tp_;               // tensor-parallel ranks, which split each micro-batch's tokens
  int d_, seq_, n_experts_, top_k_, hidden_, n_shared_, shared_hidden_;
  Router router_;
  TokenDispatcher dispatcher_;
  std::vector<Saved> saved_;
};

}  // namespace mt
