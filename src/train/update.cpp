#include "train/update.hpp"

#include <cmath>

#include "model/flops.hpp"
#include "model/step_statistics.hpp"
#include "ops/backend/device_timer.hpp"
#include "train/lr_schedule.hpp"

namespace mt {

UpdateStats apply_update(Model& model, Optimizer& optimizer, const Config& cfg, const LrCycle& lr_cycle,
                         long long step) {
  const auto& t = cfg.training;
  UpdateStats u;
  DeviceTimer sync_time(model.backend());
  sync_time.time([&] { u.grad_norm = optimizer.reduce_gradients(); });
  u.time_grad_sync = sync_time.take_seconds();
  if (!std::isfinite(u.grad_norm)) return u;
  if (t.grad_clip > 0 && u.grad_norm > t.grad_clip) optimizer.scale_gradients(float(t.grad_clip / u.grad_norm));
  u.lr = learning_rate(cfg, lr_cycle, step);
  optimizer.step(u.lr, step + 1);
  const double routed = double(t.global_batch) * cfg.model.seq_len * cfg.model.moe.top_k;
  // Every layer's row, wherever it lives: each pipeline rank fills its layers (one of a DualPipe
  // pair speaks for both copies) and the pipeline group adds them up.
  const int E = cfg.model.moe.n_routed_experts;
  const size_t all = size_t(moe_layer_count(cfg.model)) * E;
  std::vector<float> rows(2 * all, 0.0f);
  const ParallelGroups& g = optimizer.groups();
  update_biases(model);
  if (g.mirror->rank() == 0)
    for (const LayerStatistics& layer : step_statistics(model)) {
      const size_t at = size_t(layer.layer) * E;
      for (int e = 0; e < E; ++e) {
        rows[at + e] = float(layer.load[e] / routed);
        rows[all + at + e] = layer.bias[e];
      }
    }
  g.pp->all_reduce_sum(rows);
  u.expert_load.assign(rows.begin(), rows.begin() + all);
  u.expert_bias.assign(rows.begin() + all, rows.end());
  u.applied = true;
  return u;
}

}  // namespace mt
