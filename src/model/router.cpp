#include "model/router.hpp"

namespace mt {

Router::Router(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix)
    : env_(env.fp8_router ? env : env.high_precision()), d_(cfg.d_model), seq_(cfg.seq_len),
      experts_(cfg.moe.n_routed_experts), top_k_(cfg.moe.top_k),
      n_groups_(cfg.moe.n_groups), topk_groups_(cfg.moe.topk_groups), route_scale_(float(cfg.moe.route_scale)),
      gamma_(float(cfg.moe.bias_update_speed)), alpha_(float(cfg.moe.aux_alpha)),
      balance_(cfg.moe.aux_loss),
      load_(env.be(), DType::f64, size_t(experts_)), prob_sum_(env.be(), DType::f64, size_t(experts_)),
      global_f_(env.be(), DType::f64, size_t(experts_)) {
  weight = env.params->add(prefix + ".router", {experts_, d_}, ParamStore::Init::normal, true);
  bias = env.params->add_buffer(prefix + ".router_bias", size_t(experts_));
}

int Router::group_size(int tokens) const {
  switch (balance_) {
    case BalanceLoss::sequence: return seq_;
    case BalanceLoss::micro_batch:
    case BalanceLoss::global_batch: return tokens;
    case BalanceLoss::none: return 0;
  }
  return 0;
}

void Router::forward(Arena& arena, const float* x, int tokens, float aux_weight, Routing& r, double* aux_sum,
                     bool recompute) {
  const Backend& be = env_.be();
  const ParamStore& p = *env_.params;
  const size_t scores = size_t(tokens) * experts_, picks = size_t(tokens) * top_k_;
  r.tokens = tokens;
  r.x = x;
  r.aux_weight = aux_weight;
  r.f = nullptr;
  r.scores = arena.floats(scores);
  env_.linear_forward(x, env_.weight(weight), tokens, d_, experts_, r.scores);
  be.sigmoid({.n = scores, .x = r.scores, .y = r.scores});
  r.chosen = arena.ints(picks);
  r.gates = arena.floats(picks);
  be.router_select({.tokens = tokens, .experts = experts_, .top_k = top_k_, .n_groups = n_groups_,
                    .topk_groups = topk_groups_, .route_scale = route_scale_, .scores = r.scores,
                    .bias = p.buffer(bias), .chosen = r.chosen, .gates = r.gates});
  const int group = group_size(tokens);
  if (group == 0) return;
  if (balance_ == BalanceLoss::global_batch) {
    if (recompute) return;
    be.balance_prob_sums({.tokens = tokens, .experts = experts_, .scores = r.scores, .prob_sum = prob_sum_.f64()});
    return;
  }
  r.f = arena.doubles(size_t(tokens / group) * experts_);
  be.balance_loss({.tokens = tokens, .experts = experts_, .top_k = top_k_, .group = group, .alpha = alpha_,
                   .scores = r.scores, .chosen = r.chosen, .f = r.f, .weight = aux_weight, .sum = aux_sum});
}

void Router::finish_global_balance(long tokens, double* sum) {
  global_tokens_ = tokens;
  env_.be().global_balance({.experts = experts_, .top_k = top_k_, .tokens = tokens, .alpha = alpha_,
                            .load = load_.f64(), .prob_sum = prob_sum_.f64(), .f = global_f_.f64(), .sum = sum});
}

void Router::backward_input(Arena& arena, Routing& r, const float* dgate, float* dx, Rows of_dx) {
  const int group = group_size(r.tokens);
  const bool global = balance_ == BalanceLoss::global_batch;
  RouterBackwardArgs a{.tokens = r.tokens, .experts = experts_, .top_k = top_k_, .route_scale = route_scale_,
                       .scores = r.scores, .chosen = r.chosen, .gates = r.gates, .dgate = dgate};
  if (group > 0) {
    a.f = global ? global_f_.f64() : r.f;
    a.group = group;
    a.f_stride = global ? 0 : experts_;
    a.coef = double(alpha_) * r.aux_weight / (global ? double(global_tokens_) : double(group));
  }
  r.dlogits = arena.floats(size_t(r.tokens) * experts_);
  a.dlogits = r.dlogits;
  env_.be().router_backward(a);
  env_.linear_backward_input(r.dlogits + size_t(of_dx.first) * experts_, env_.weight(weight), of_dx.count, d_,
                             experts_, dx, true);
}

void Router::backward_weight(const Routing& r) {
  env_.linear_backward_weight(r.dlogits, r.x, r.tokens, d_, experts_, env_.params->grad(weight));
}

void Router::reset_step_statistics() {
  load_.zero();
  prob_sum_.zero();
}

void Router::update_bias(const double* guard) {
  if (gamma_ == 0.0f) return;
  env_.be().bias_update(
      {.experts = experts_, .gamma = gamma_, .load = load_.f64(), .bias = env_.params->buffer(bias), .guard = guard});
}

}  // namespace mt
