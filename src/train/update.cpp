#include "train/update.hpp"

#include "train/lr_schedule.hpp"

namespace mt {

UpdateStats apply_update(Model& model, Optimizer& optimizer, const Config& cfg, long long step) {
  const auto& t = cfg.training;
  UpdateStats u;
  u.grad_norm = optimizer.reduce_gradients();
  if (t.grad_clip > 0 && u.grad_norm > t.grad_clip) optimizer.scale_gradients(float(t.grad_clip / u.grad_norm));
  u.lr = learning_rate(cfg, int(step));
  optimizer.step(u.lr, step + 1);
  const double routed = double(t.global_batch) * cfg.model.seq_len * cfg.model.moe.top_k;
  for (MoE* moe : model.moe_layers()) {
    for (double load : moe->step_load()) u.expert_load.push_back(float(load / routed));
    moe->update_bias();
    u.expert_bias.insert(u.expert_bias.end(), moe->bias(), moe->bias() + moe->n_experts());
  }
  return u;
}

}  // namespace mt
