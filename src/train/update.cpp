#include "train/update.hpp"

#include <cmath>

#include "model/flops.hpp"
#include "model/step_statistics.hpp"
#include "train/lr_schedule.hpp"

namespace mt {

double queue_update(Model& model, Optimizer& optimizer, const Config& cfg, const LrCycle& lr_cycle, long long step,
                    const StepScalars& scalars, DeviceTimer& sync_time, GraphCapture* graph, QkClip* qk_clip) {
  const double lr = learning_rate(cfg, lr_cycle, step);
  optimizer.load_step(lr, step + 1);  // the step's one host value, uploaded before the graph
  double* guard = scalars.at(StepScalars::norm_sq);
  const Backend& be = model.backend();
  if (graph) {
    // A timer's marks inside a graph cannot be read: the graphed sums are timed with the update.
    graph->begin(be, "update");
    optimizer.reduce_gradients(guard);
  } else {
    sync_time.time([&] { optimizer.reduce_gradients(guard); });
  }
  if (cfg.training.grad_clip > 0) optimizer.clip_gradients(guard, cfg.training.grad_clip);
  optimizer.step(guard);
  if (qk_clip) qk_clip->queue();
  update_biases(model, guard);
  if (graph) graph->end();
  return lr;
}

UpdateStats update_record(Model& model, const Optimizer& optimizer, const Config& cfg, const StepScalars& scalars,
                          double lr, const QkClip* qk_clip) {
  const auto& t = cfg.training;
  UpdateStats u;
  u.grad_norm = std::sqrt(scalars.value(StepScalars::norm_sq));
  if (!std::isfinite(u.grad_norm) || !std::isfinite(scalars.value(StepScalars::loss_check))) return u;
  u.lr = lr;
  const double routed = double(t.global_batch) * cfg.model.seq_len * cfg.model.moe.top_k;
  // Every layer's row, wherever it lives: each pipeline rank fills its layers (one of a DualPipe
  // pair speaks for both copies) and the pipeline group adds them up.
  const int E = cfg.model.moe.n_routed_experts;
  const size_t all = size_t(moe_layer_count(cfg.model)) * E;
  std::vector<float> rows(2 * all, 0.0f);
  const ParallelGroups& g = optimizer.groups();
  if (g.mirror->rank() == 0) {
    const std::vector<int> index = model.moe_layer_indices();
    for (size_t i = 0; i < index.size(); ++i) {
      const std::vector<double> load = scalars.load(int(i));
      const std::vector<float> bias = scalars.bias(int(i));
      const size_t at = size_t(index[i]) * E;
      for (int e = 0; e < E; ++e) {
        rows[at + e] = float(load[e] / routed);
        rows[all + at + e] = bias[e];
      }
    }
  }
  g.pp->all_reduce_sum(rows);
  u.expert_load.assign(rows.begin(), rows.begin() + all);
  u.expert_bias.assign(rows.begin() + all, rows.end());
  if (qk_clip) qk_clip->record(u.max_logit, u.clipped_heads);
  u.applied = true;
  return u;
}

UpdateStats apply_update(Model& model, Optimizer& optimizer, const Config& cfg, const LrCycle& lr_cycle,
                         long long step, QkClip* qk_clip) {
  StepScalars scalars(model, 0, 0.0);
  scalars.zero();
  DeviceTimer sync_time(model.backend());
  const double lr = queue_update(model, optimizer, cfg, lr_cycle, step, scalars, sync_time, nullptr, qk_clip);
  scalars.download();
  UpdateStats u = update_record(model, optimizer, cfg, scalars, lr, qk_clip);
  u.time_grad_sync = sync_time.take_seconds();
  return u;
}

}  // namespace mt
