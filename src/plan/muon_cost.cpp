// Muon's matrices listed per block as the model holds them (model/params.cpp), with their
// Newton-Schulz cost.
#include "plan/muon_cost.hpp"

#include <algorithm>

#include "model/flops.hpp"
#include "plan/collectives.hpp"
#include "plan/cost_terms.hpp"

namespace mt::plan {

OptimizerPlan optimizer_plan(const OptimizerConfig& o) {
  return {o.kind == OptimizerKind::muon, o.muon.ns_steps, o.muon.router == RouterOptimizer::muon};
}

double newton_schulz_flops(double rows, double cols, int steps) {
  const double s = std::min(rows, cols), l = std::max(rows, cols);
  return steps * (4 * s * s * l + 2 * s * s * s);
}

namespace {

// Adds `count` matrices of [rows, cols].
struct Tally {
  int steps;
  double params = 0, flops = 0;
  void add(double rows, double cols, double count = 1) {
    if (rows <= 0 || cols <= 0) return;
    params += count * rows * cols;
    flops += count * newton_schulz_flops(rows, cols, steps);
  }
};

void add_attention(const ModelConfig& m, Tally& t) {
  const auto& a = m.attention;
  const double d = m.d_model, H = m.n_heads;
  if (a.kind == AttentionKind::mla) {
    const double qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    if (a.q_lora_rank > 0) {
      t.add(a.q_lora_rank, d);
      t.add(H * qk, a.q_lora_rank);
    } else {
      t.add(H * qk, d);
    }
    t.add(a.kv_lora_rank + a.qk_rope_head_dim, d);
    t.add(H * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank);
    t.add(d, H * a.v_head_dim);
    return;
  }
  const double kv_heads = a.n_kv_heads > 0 ? a.n_kv_heads : H;
  t.add(H * m.head_dim, d);
  t.add(kv_heads * m.head_dim, d, 2);
  t.add(d, H * m.head_dim);
}

// A block's FFN: the dense SwiGLU, or the router, the shared experts and `routed` experts' matrices.
void add_ffn(const ModelConfig& m, bool moe, const OptimizerPlan& o, Tally& dense, Tally& routed) {
  const double d = m.d_model;
  if (!moe) {
    dense.add(m.ffn_hidden, d, 2);
    dense.add(d, m.ffn_hidden);
    return;
  }
  const auto& e = m.moe;
  if (o.router_muon) dense.add(e.n_routed_experts, d);
  const double shared = double(e.n_shared_experts) * e.expert_hidden;
  dense.add(shared, d, 2);
  dense.add(d, shared);
  routed.add(e.expert_hidden, d, 2.0 * e.n_routed_experts);
  routed.add(d, e.expert_hidden, e.n_routed_experts);
}

}  // namespace

MuonWork muon_work(const ModelConfig& m, const OptimizerPlan& o) {
  Tally dense{o.ns_steps}, routed{o.ns_steps};
  for (int i = 0; i < m.n_layers; ++i) {
    add_attention(m, dense);
    add_ffn(m, i >= m.n_dense_layers, o, dense, routed);
  }
  for (int i = 0; i < m.mtp.depth; ++i) {
    dense.add(m.d_model, 2.0 * m.d_model);  // the MTP projection
    add_attention(m, dense);
    add_ffn(m, m.n_layers > m.n_dense_layers, o, dense, routed);
  }
  return {dense.params, routed.params, dense.flops, routed.flops};
}

MuonStepCost muon_step_cost(const ModelConfig& m, const Cluster& c, const Layout& l, const StepShape& s,
                            const HeldParams& held, const OptimizerPlan& o) {
  MuonStepCost cost;
  if (!o.muon) return cost;
  const MuonWork w = muon_work(m, o);
  const double experts = routed_expert_params(m), dense = total_params(m) - experts;
  const double muon_dense = held.dense * w.dense_params / dense;
  const double muon_expert = experts > 0 ? held.expert * w.expert_params / experts : 0;
  const bool sharded = l.zero >= 1;
  const double owned = muon_dense / (sharded ? held.dense_replicas : 1) +
                       muon_expert / (sharded ? held.expert_replicas : 1);
  cost.optimizer_bytes = -4 * owned;
  cost.elementwise_s = -8 * owned / c.accel.hbm_bandwidth;
  // The rank's share of its stage's matrices, whole (tensor-parallel shards gathered).
  const double stage = double(s.held) / s.pieces;
  const double flops = w.dense_flops * stage / (l.tp * (sharded ? held.dense_replicas : 1)) +
                       w.expert_flops * stage / (l.ep * (sharded ? held.expert_replicas : 1));
  cost.newton_schulz_s = flops / (c.accel.bf16_flops * c.matmul_efficiency_bf16);
  // Dense replicas are tp ranks apart, an expert's ep ranks apart, as for the gradients' reduction.
  if (sharded)
    cost.zero_s = all_reduce_time(c, 4 * muon_dense, held.dense_replicas, l.tp) +
                  all_reduce_time(c, 4 * muon_expert, held.expert_replicas, l.ep);
  if (l.tp > 1)
    cost.gather_s = 6 * muon_dense * (l.tp - 1) / l.tp / (c.domain_bandwidth(l.tp) * c.bus_efficiency);
  return cost;
}

}  // namespace mt::plan
