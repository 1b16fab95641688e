#include "train/accumulate.hpp"

#include "comm/comm.hpp"
#include "ops/backend/device_timer.hpp"

namespace mt {

namespace {
bool global_balance(const ModelConfig& m) { return m.moe.aux_loss == BalanceLoss::global_batch; }
}  // namespace

LossScales loss_scales(const ModelConfig& m, int global_batch, int micro_batch) {
  const BalanceLoss kind = m.moe.aux_loss;
  const float groups = kind == BalanceLoss::sequence      ? float(global_batch)
                       : kind == BalanceLoss::micro_batch ? float(global_batch / micro_batch)
                                                          : 1.0f;
  const float mtp = m.mtp.depth > 0 ? float(m.mtp.weight / (m.mtp.depth * double(global_batch))) : 0.0f;
  return {1.0f / float(global_batch * m.seq_len), 1.0f / groups, mtp};
}

int slots_needed(const ModelConfig& m, int global_batch, int micro_batch, int dp) {
  return global_balance(m) ? global_batch / micro_batch / dp : 1;
}

void add_forward_result(StepTotals& totals, const ForwardResult& r, const ModelConfig& m, int global_batch) {
  totals.ce_sum += r.ce_sum;
  totals.aux += r.aux_sum;
  for (size_t k = 0; k < r.mtp_ce_sums.size(); ++k)
    totals.mtp += r.mtp_ce_sums[k] / (double(m.mtp.depth) * global_batch * (m.seq_len - int(k) - 1));
}

namespace {
// A few numbers per expert: they cross as host copies.
void sum_over(const Buffer& b, Comm& group) {
  std::vector<double> v = b.to_host_f64();
  group.all_reduce_sum(v);
  b.from_host(v);
}
}  // namespace

void sum_moe_statistics(Model& model, Comm& group) {
  if (group.size() == 1) return;
  const bool global = global_balance(model.config());
  for (MoE* moe : model.moe_layers()) {
    sum_over(moe->router().step_load(), group);
    if (global) sum_over(moe->router().step_prob_sums(), group);
  }
}

void sum_token_shares(Model& model, Comm& tp) {
  if (tp.size() == 1) return;
  for (MoE* moe : model.moe_layers()) sum_over(moe->router().step_load(), tp);
}

void start_step(Model& model) {
  model.params.zero_grads();
  for (MoE* moe : model.moe_layers()) moe->router().reset_step_statistics();
}

double finish_global_balance(Model& model, int global_batch) {
  double loss = 0;
  for (MoE* moe : model.moe_layers()) loss += moe->finish_global_balance(long(global_batch) * model.config().seq_len);
  return loss;
}

StepTotals accumulate_gradients(Model& model, int global_batch, int micro_batch, const FillMicroBatch& fill,
                                const std::function<void(int mb, int slot)>& after_forward, Comm* dp, Comm* tp) {
  const ModelConfig& m = model.config();
  const int ranks = dp ? dp->size() : 1;
  const int count = global_batch / micro_batch / ranks;
  const int first = (dp ? dp->rank() : 0) * count;
  const bool global = global_balance(m);
  const LossScales scales = loss_scales(m, global_batch, micro_batch);
  StepTotals totals;
  start_step(model);
  std::vector<int> inputs, targets;
  // Timed by the device (events on a GPU) and read once at the end, so the host queues ahead.
  DeviceTimer forward_time(model.backend()), backward_time(model.backend());
  auto backward = [&](int slot) {
    backward_time.time([&] {
      model.backward_input(slot, true);
      model.backward_weight(slot);
    });
    model.retire(slot);
  };
  for (int i = 0; i < count; ++i) {
    const int mb = first + i;
    fill(mb, inputs, targets);
    const int slot = global ? i : 0;
    ForwardResult r;
    forward_time.time([&] { r = model.forward(slot, {inputs.data(), targets.data(), micro_batch}, scales); });
    if (after_forward) after_forward(mb, slot);
    add_forward_result(totals, r, m, global_batch);
    if (!global) backward(slot);
  }
  double shared_aux = 0;  // the same on every rank: not summed over the group
  if (tp) sum_token_shares(model, *tp);
  if (dp) sum_moe_statistics(model, *dp);
  if (global) {  // f of the global batch is known only now
    shared_aux = finish_global_balance(model, global_batch);
    for (int i = 0; i < count; ++i) backward(i);
  }
  if (ranks > 1) {
    std::vector<double> sums{totals.ce_sum, totals.aux, totals.mtp};
    dp->all_reduce_sum(sums);
    totals.ce_sum = sums[0], totals.aux = sums[1], totals.mtp = sums[2];
  }
  totals.aux += shared_aux;
  totals.t_forward = forward_time.take_seconds();
  totals.t_backward = backward_time.take_seconds();
  return totals;
}

}  // namespace mt
