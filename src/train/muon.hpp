#pragma once
// Which parameters Muon updates under optimizer.kind = "muon", how it sees each as matrices, and its
// per-step values. Muon takes the hidden matrices: every 2-D weight but the embedding and the head
// (attention and MLA projections as whole matrices, MLA's per-head wq_b and wkv_b included, as Kimi K2
// and torchtitan treat them; dense and shared FFNs; MTP projections; the router's gate unless
// optimizer.muon.router = "adamw"), and the routed experts' [experts, rows, cols] weights one matrix
// per expert. AdamW updates the rest: the embedding, the head, norms.
#include "config/config.hpp"
#include "model/params.hpp"
#include "ops/optimizer/args.hpp"

namespace mt {

struct MuonMatrix {
  bool muon = false;         // false: AdamW updates the parameter
  int count = 0, rows = 0, cols = 0;  // count matrices of [rows, cols] (whole, not a tensor-parallel slice)
  double scale = 1.0;        // the update's scale (optimizer.muon.scale) for [rows, cols]
};

MuonMatrix muon_matrix(const ParamInfo& p, const OptimizerConfig& cfg);

// Muon's values at the step whose AdamW learning rate is `lr`: Muon's lr follows the same schedule.
MuonStepValues muon_step_values(const OptimizerConfig& cfg, double lr);

}  // namespace mt
