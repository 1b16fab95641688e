#pragma once
#include "config/config.hpp"
#include "model/params.hpp"

namespace mt {
// Global L2 norm of all gradients.
double grad_norm(const ParamStore& p);
// Multiplies all gradients by `factor`.
void scale_grads(ParamStore& p, float factor);
// One AdamW step (t is 1-based) with decoupled weight decay on the parameters marked `decay`.
void adamw_step(ParamStore& p, const OptimizerConfig& cfg, double lr, long t);
}  // namespace mt
