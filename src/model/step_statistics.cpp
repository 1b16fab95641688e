#include "model/step_statistics.hpp"

#include "comm/device_comm.hpp"
#include "model/model.hpp"
#include "ops/backend/mark.hpp"

namespace mt {

namespace {
// Sums the buffers over `group` on its queue, after the chunks' work so far and before their next.
template <class Buffers>
void sum_over(Model& model, DeviceComm& group, Buffers buffers) {
  const size_t chunks = model.chunks().size();
  for (size_t c = 0; c < chunks; ++c) order_after(group.backend(), model.backend(int(c)));
  for (MoE* moe : model.moe_layers()) buffers(moe->router(), [&](const Buffer& b) {
      group.all_reduce_sum(device_span(b));
    });
  for (size_t c = 0; c < chunks; ++c) order_after(model.backend(int(c)), group.backend());
}
}  // namespace

void reset_step_statistics(Model& model) {
  for (MoE* moe : model.moe_layers()) moe->router().reset_step_statistics();
}

void sum_token_shares(Model& model, DeviceComm& tp) {
  if (tp.size() == 1) return;
  sum_over(model, tp, [](const Router& r, auto sum) { sum(r.step_load()); });
}

void sum_step_statistics(Model& model, DeviceComm& group) {
  if (group.size() == 1) return;
  const bool global = model.config().moe.aux_loss == BalanceLoss::global_batch;
  sum_over(model, group, [&](const Router& r, auto sum) {
    sum(r.step_load());
    if (global) sum(r.step_prob_sums());
  });
}

void finish_global_balance(Model& model, long tokens, double* sum) {
  for (MoE* moe : model.moe_layers()) moe->finish_global_balance(tokens, sum);
}

void update_biases(Model& model, const double* guard) {
  // The guard is written on the model's first stream; the routers' biases live on their chunks'.
  for (size_t c = 0; c < model.chunks().size(); ++c) order_after(model.backend(int(c)), model.backend());
  for (MoE* moe : model.moe_layers()) moe->router().update_bias(guard);
}

}  // namespace mt
