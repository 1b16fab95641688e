#pragma once
// `moetrain dump-step`: runs the first optimizer step of an experiment (on precision.device) and
// writes everything that another implementation needs to check it, in one HDF5 file:
//   attributes  config_toml, loss (mean cross-entropy), aux_loss, mtp_loss, grad_norm, lr
//   /batch/inputs, /batch/targets     [global_batch, seq_len] int32
//   /before/params/<name>, /before/buffers/<name>     the initial state
//   /logits                           [global_batch * seq_len, vocab] main-model logits
//   /grads/<name>                     the step's gradients, before clipping
//   /expert_load                      [moe layers, experts] fraction of routed tokens
//   /after/params/<name>, /after/buffers/<name>, /after/exp_avg/<name>, /after/exp_avg_sq/<name>
#include <string>

#include "config/config.hpp"

namespace mt {
// start_only: only the config, the initial state and the batch (what a throughput comparison
// needs), without running the step. `from`: a checkpoint directory of the same model whose
// parameters and buffers replace the initial ones (a trained or imported model's step).
void dump_step(const Config& cfg, const std::string& path, bool start_only = false, const std::string& from = "");
}  // namespace mt
