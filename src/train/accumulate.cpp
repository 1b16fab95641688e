#include "train/accumulate.hpp"

#include <chrono>

namespace mt {

namespace {
bool global_balance(const ModelConfig& m) { return m.moe.aux_loss == "global_batch"; }
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

LossScales loss_scales(const ModelConfig& m, int global_batch, int micro_batch) {
  const std::string& kind = m.moe.aux_loss;
  const float groups = kind == "sequence" ? float(global_batch) : kind == "micro_batch" ? float(global_batch / micro_batch) : 1.0f;
  const float mtp = m.mtp.depth > 0 ? float(m.mtp.weight / (m.mtp.depth * double(global_batch))) : 0.0f;
  return {1.0f / float(global_batch * m.seq_len), 1.0f / groups, mtp};
}

int slots_needed(const ModelConfig& m, int global_batch, int micro_batch) {
  return global_balance(m) ? global_batch / micro_batch : 1;
}

StepTotals accumulate_gradients(Model& model, int global_batch, int micro_batch, const FillMicroBatch& fill,
                                const std::function<void(int mb, int slot)>& after_forward) {
  const ModelConfig& m = model.config();
  const int count = global_batch / micro_batch;
  const bool global = global_balance(m);
  const LossScales scales = loss_scales(m, global_batch, micro_batch);
  StepTotals totals;
  std::fill(model.params.grads.begin(), model.params.grads.end(), 0.0f);
  for (MoE* moe : model.moe_layers()) moe->reset_step_load();
  std::vector<int> inputs, targets;
  auto backward = [&](int slot) {
    const auto t0 = std::chrono::steady_clock::now();
    model.backward_input(slot);
    model.backward_weight(slot);
    model.retire(slot);
    totals.t_backward += seconds_since(t0);
  };
  for (int mb = 0; mb < count; ++mb) {
    fill(mb, inputs, targets);
    const int slot = global ? mb : 0;
    const auto t0 = std::chrono::steady_clock::now();
    ForwardResult r = model.forward(slot, {inputs.data(), targets.data(), micro_batch}, scales);
    totals.t_forward += seconds_since(t0);
    if (after_forward) after_forward(mb, slot);
    totals.ce_sum += r.ce_sum;
    totals.aux += r.aux_sum;
    for (int k = 0; k < m.mtp.depth; ++k)
      totals.mtp += r.mtp_ce_sums[k] / (double(m.mtp.depth) * global_batch * (m.seq_len - k - 1));
    if (!global) backward(slot);
  }
  if (global) {  // f of the global batch is known only now
    for (MoE* moe : model.moe_layers()) totals.aux += moe->finish_global_balance(long(global_batch) * m.seq_len);
    for (int mb = 0; mb < count; ++mb) backward(mb);
  }
  return totals;
}

}  // namespace mt
