#pragma once
// AdamW's per-step coefficients (decoupled weight decay, bias-corrected moments); the update
// itself is the adamw op (ops/optimizer/math.hpp), which reads them from device memory.
#include "config/config.hpp"
#include "ops/optimizer/args.hpp"

namespace mt {

// Coefficients of step t (1-based) at learning rate lr.
AdamwStepValues adamw_step_values(const OptimizerConfig& cfg, double lr, long t);

}  // namespace mt
