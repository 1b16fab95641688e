#include "model/step_statistics.hpp"

#include "comm/comm.hpp"
#include "model/model.hpp"

namespace mt {

namespace {
// A few numbers per expert: they cross as host copies.
void sum_over(const Buffer& b, Comm& group) {
  std::vector<double> v = b.to_host_f64();
  group.all_reduce_sum(v);
  b.from_host(v);
}
}  // namespace

void reset_step_statistics(Model& model) {
  for (MoE* moe : model.moe_layers()) moe->router().reset_step_statistics();
}

void sum_token_shares(Model& model, Comm& tp) {
  if (tp.size() == 1) return;
  for (MoE* moe : model.moe_layers()) sum_over(moe->router().step_load(), tp);
}

void sum_step_statistics(Model& model, Comm& group) {
  if (group.size() == 1) return;
  const bool global = model.config().moe.aux_loss == BalanceLoss::global_batch;
  for (MoE* moe : model.moe_layers()) {
    sum_over(moe->router().step_load(), group);
    if (global) sum_over(moe->router().step_prob_sums(), group);
  }
}

double finish_global_balance(Model& model, long tokens) {
  double loss = 0;
  for (MoE* moe : model.moe_layers()) loss += moe->finish_global_balance(tokens);
  return loss;
}

void update_biases(Model& model) {
  for (MoE* moe : model.moe_layers()) moe->router().update_bias();
}

std::vector<LayerStatistics> step_statistics(Model& model) {
  const std::vector<int> index = model.moe_layer_indices();
  const std::vector<MoE*> layers = model.moe_layers();
  std::vector<LayerStatistics> out;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Router& router = layers[i]->router();
    out.push_back({index[i], router.step_load().to_host_f64(), model.params.host_buffer(router.bias)});
  }
  return out;
}

}  // namespace mt
