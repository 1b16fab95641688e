#pragma once
// Muon's share of a planned step (optimizer.kind = "muon"): the hidden matrices it updates, the
// Newton-Schulz FLOPs that orthogonalise them, and their optimizer state (one momentum buffer
// where AdamW keeps two moments).
#include "config/config.hpp"
#include "parallel/layout.hpp"
#include "plan/cluster.hpp"
#include "plan/step_shape.hpp"

namespace mt::plan {

// The experiment's optimizer as the planner costs it.
struct OptimizerPlan {
  bool muon = false;
  int ns_steps = 5;          // optimizer.muon.ns_steps
  bool router_muon = true;   // optimizer.muon.router = "muon": the router's gate is a Muon matrix
};
OptimizerPlan optimizer_plan(const OptimizerConfig& o);

// Over the whole model (MTP blocks included): Muon's parameters and one step's Newton-Schulz FLOPs,
// split into dense matrices (attention, dense and shared FFNs, routers) and routed experts.
struct MuonWork {
  double dense_params = 0, expert_params = 0;
  double dense_flops = 0, expert_flops = 0;
};
MuonWork muon_work(const ModelConfig& m, const OptimizerPlan& o);

// FLOPs of `steps` iterations of the quintic on one [rows, cols] matrix: per iteration
// A = X X^T, A A and B X on X of [s, l] (s the smaller side): 4 s^2 l + 2 s^3.
double newton_schulz_flops(double rows, double cols, int steps);

// What Muon changes on one rank against AdamW (cost_terms.cpp's state_memory and optimizer_time).
// Its state is a momentum buffer where AdamW keeps two moments, and its element-wise pass moves 22
// bytes where AdamW's moves 30. Each whole matrix is orthogonalised once, by its owner, so under
// ZeRO the work divides among the replicas; without ZeRO every replica repeats it. Under ZeRO the
// trainer (train/optimizer_muon.cpp) all-gathers each matrix's FP32 update pieces over the ZeRO
// group and reduce-scatters the owner's result back: one FP32 all-reduce's volume of the Muon
// matrices at the end of the step, beside ZeRO's own collectives. Under tensor parallelism the
// owner gathers the FP32 gradient's shards and scatters the BF16 update's back, inside the domain.
struct MuonStepCost {
  double optimizer_bytes = 0;  // added to the optimizer state (negative: less)
  double elementwise_s = 0;    // added to the element-wise pass (negative: less)
  double newton_schulz_s = 0;
  double gather_s = 0;         // tensor parallelism's gather and scatter
  double zero_s = 0;           // ZeRO's gather of the pieces and scatter of the result
  double seconds() const { return elementwise_s + newton_schulz_s + gather_s + zero_s; }
};
struct HeldParams;  // plan/cost_terms.hpp: the parameters of either kind one rank holds
MuonStepCost muon_step_cost(const ModelConfig& m, const Cluster& c, const Layout& l, const StepShape& s,
                            const HeldParams& held, const OptimizerPlan& o);

}  // namespace mt::plan
