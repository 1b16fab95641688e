#include "model/moe.hpp"

#include "ops/backend/mark.hpp"

namespace mt {

MoE::MoE(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix, int max_in_flight)
    : env_(env), shared_env_(env), tp_(env.shard.tp_size), d_(cfg.d_model), seq_(cfg.seq_len),
      n_experts_(cfg.moe.n_routed_experts), top_k_(cfg.moe.top_k), hidden_(cfg.moe.expert_hidden),
      n_shared_(cfg.moe.n_shared_experts),
      shared_hidden_(cfg.moe.n_shared_experts * cfg.moe.expert_hidden), router_(env, cfg, prefix),
      dispatcher_(env, cfg.d_model, cfg.moe.n_routed_experts, cfg.moe.top_k), saved_(max_in_flight) {
  using I = ParamStore::Init;
  if (env.side) shared_env_.backend = env.side;
  ParamStore& p = *env.params;
  const int64_t E = n_experts_, H = hidden_, D = d_;
  // Several shared experts are one SwiGLU with their hidden units side by side: the sum of
  // their outputs is exactly that wider FFN's output.
  shared_gate = shared_up = shared_down = -1;
  // Each tensor-parallel rank runs the shared experts on its share of the tokens: a part of
  // their gradient.
  if (n_shared_ > 0) {
    const Spread part = Spread::tensor_partial;
    shared_gate = p.add(prefix + ".shared.w_gate", {shared_hidden_, D}, I::normal, true, part);
    shared_up = p.add(prefix + ".shared.w_up", {shared_hidden_, D}, I::normal, true, part);
    shared_down = p.add(prefix + ".shared.w_down", {D, shared_hidden_}, I::normal, true, part);
  }
  const Split mine{0, env.shard.ep_size, env.shard.ep_rank};
  const Spread split = Spread::expert_split;
  expert_gate = p.add(prefix + ".experts.w_gate", {E, H, D}, I::normal, true, split, mine);
  expert_up = p.add(prefix + ".experts.w_up", {E, H, D}, I::normal, true, split, mine);
  expert_down = p.add(prefix + ".experts.w_down", {E, D, H}, I::normal, true, split, mine);
}

GroupedExpertWeights MoE::expert_weights() const {
  return {env_.weight(expert_gate), env_.weight(expert_up), env_.weight(expert_down), dispatcher_.local_experts(), d_,
          hidden_};
}

SwigluWeights MoE::shared_weights() const {
  return {env_.weight(shared_gate), env_.weight(shared_up), env_.weight(shared_down), d_, shared_hidden_};
}

void MoE::forward(int slot, Arena& arena, Arena& redo, const float* x, int batch, float* y, float aux_weight,
                  double* aux_sum, bool recompute) {
  Saved& s = saved_[slot];
  const Backend& be = env_.be();
  const int rows = batch * seq_;
  s.rows = rows;
  router_.forward(arena, x, rows, aux_weight, s.routing, aux_sum, recompute);
  // This rank's share of the tokens: its rows of x, y and the routing.
  const int n = s.share = rows / tp_, first = s.first = env_.shard.tp_rank * n;
  const float* xs = x + size_t(first) * d_;
  float* ys = gathered() ? arena.floats(size_t(n) * d_) : y;
  double* load = recompute ? nullptr : router_.step_load().f64();
  const GemmOperand xe = dispatcher_.permute(arena, s.routing.chosen + size_t(first) * top_k_, n, xs, load, s.dispatch);
  s.ye = arena.floats(size_t(n) * top_k_ * d_);
  const GroupedExpertWeights w = expert_weights();
  beside_shared(
      [&] {
        if (n_shared_ > 0) swiglu_forward(shared_env_, arena, redo, shared_weights(), xs, n, ys, false, s.shared);
        else be.zero(ys, size_t(n) * d_ * sizeof(float));
      },
      [&](const std::function<void()>& meanwhile) {
        dispatcher_.exchange(
            arena, s.dispatch, xe, s.ye,
            [&](GemmOperand in, const ExpertRows& expert_rows, float* out) {
              grouped_experts_forward(env_, arena, redo, w, expert_rows, in, out, s.experts);
            },
            meanwhile, env_.gemm_inputs == GemmPrecision::fp8);
      });
  be.moe_combine({.tokens = n, .top_k = top_k_, .dim = d_, .rows = s.ye, .slot_row = s.dispatch.slot_row,
                  .gates = s.routing.gates + size_t(first) * top_k_, .y = ys});
  if (gathered()) env_.shard.tp->all_gather(device_span(ys, size_t(n) * d_), device_span(y, size_t(rows) * d_));
}

void MoE::redo(int slot, Arena& redo, const float* x) {
  Saved& s = saved_[slot];
  s.routing.x = x;
  grouped_experts_redo(env_, redo, expert_weights(), s.experts);
  if (n_shared_ > 0) swiglu_redo(env_, redo, shared_weights(), x + size_t(s.first) * d_, s.shared);
}

void MoE::backward_input(int slot, Arena& arena, const float* dy, float* dx, const Fp8Codes& dy_codes) {
  Saved& s = saved_[slot];
  const Backend& be = env_.be();
  const int rows = s.rows, n = s.share, first = s.first;
  const size_t pairs = size_t(n) * top_k_;
  const bool split = tp_ > 1, own_rows = env_.shard.split_rows();
  const float* dys = own_rows ? dy : dy + size_t(first) * d_;
  // Through the gating product: d(expert output) = g dy, d(gate) = dy . expert output.
  float* dye = arena.floats(pairs * d_);
  float* dgate = arena.floats(size_t(rows) * top_k_);
  float* dgate_s = split ? arena.floats(pairs) : dgate;
  be.moe_combine_backward({.tokens = n, .top_k = top_k_, .dim = d_, .dy = dys, .rows = s.ye,
                           .slot_row = s.dispatch.slot_row, .gates = s.routing.gates + size_t(first) * top_k_,
                           .drows = dye, .dgate = dgate_s});
  float* dxe = arena.floats(pairs * d_);
  float* dxs = gathered() ? arena.floats(size_t(n) * d_) : dx;
  const GroupedExpertWeights w = expert_weights();
  beside_shared(
      [&] {
        // dy's codes are of every row: the shared experts read them when they take every row too.
        if (n_shared_ > 0)
          swiglu_backward_input(shared_env_, arena, shared_weights(), dys, dxs, false, s.shared,
                                tp_ == 1 ? dy_codes : Fp8Codes{});
        else be.zero(dxs, size_t(n) * d_ * sizeof(float));
      },
      [&](const std::function<void()>& meanwhile) {
        dispatcher_.exchange(
            arena, s.dispatch, dye, dxe,
            [&](GemmOperand in, const ExpertRows&, float* out) {
              grouped_experts_backward_input(env_, arena, w, in.f32, out, s.experts);
            },
            meanwhile);
      });
  be.moe_combine({.tokens = n, .top_k = top_k_, .dim = d_, .rows = dxe, .slot_row = s.dispatch.slot_row,
                  .gates = nullptr, .y = dxs});
  if (gathered()) env_.shard.tp->all_gather(device_span(dxs, size_t(n) * d_), device_span(dx, size_t(rows) * d_));
  if (split) env_.shard.tp->all_gather(device_span(dgate_s, pairs), device_span(dgate, size_t(rows) * top_k_));
  // The router ran on every token on each rank: its backward does too, and adds to the input
  // gradient of the rows this rank holds.
  router_.backward_input(arena, s.routing, dgate, dx, own_rows ? Router::Rows{first, n} : Router::Rows{0, rows});
}

void MoE::beside_shared(const std::function<void()>& shared,
                        const std::function<void(const std::function<void()>&)>& routed) {
  const Backend& main = env_.be();
  const Backend& side = shared_env_.be();
  if (n_shared_ == 0 || same_queue(main, side)) {
    routed(shared);  // one queue: the shared part fills the exchange's wait
    return;
  }
  // Fork and join: the side stream starts after everything queued so far (the input, and every
  // earlier use of the arena memory it writes), and the gated sum waits for it.
  order_after(side, main);
  shared();
  routed([] {});
  order_after(main, side);
}

void MoE::backward_weight(int slot) {
  Saved& s = saved_[slot];
  const ParamStore& p = *env_.params;
  router_.backward_weight(s.routing);
  grouped_experts_backward_weight(env_, expert_weights(), {p.grad(expert_gate), p.grad(expert_up), p.grad(expert_down)},
                                  s.experts);
  if (n_shared_ > 0)
    swiglu_backward_weight(env_, shared_weights(), {p.grad(shared_gate), p.grad(shared_up), p.grad(shared_down)},
                           s.shared);
}

}  // namespace mt
