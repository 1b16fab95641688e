#include "train/dump_step.hpp"

#include <algorithm>

#include "io/checkpoint.hpp"
#include "io/h5util.hpp"
#include "io/param_h5.hpp"
#include "io/shards.hpp"
#include "model/model.hpp"
#include "model/flops.hpp"
#include "runtime/device.hpp"
#include "runtime/matmul_setup.hpp"
#include "runtime/one_rank.hpp"
#include "train/accumulate.hpp"
#include "train/step_plan.hpp"
#include "train/batches.hpp"
#include "train/qk_clip.hpp"
#include "train/update.hpp"

namespace mt {

namespace {

// QK-Clip's statistics of the step: each head's largest logit [layers, heads], and per layer the
// largest over its heads and the heads clipped.
void write_qk_clip(hid_t f, const QkClip& qk, const UpdateStats& u) {
  const std::vector<float> heads = qk.head_maxima();
  const hsize_t layers = hsize_t(qk.layers());
  h5::write_floats(f, "/qk_clip/head_max_logit", heads.data(), {layers, hsize_t(heads.size()) / layers});
  h5::write_floats(f, "/qk_clip/max_logit", u.max_logit.data(), {layers});
  h5::write_floats(f, "/qk_clip/clipped_heads", u.clipped_heads.data(), {layers});
}

void dump_on(const Config& cfg, const std::string& path, const Backend& be, int slots, bool start_only,
             const std::string& from) {
  const auto& m = cfg.model;
  const auto& t = cfg.training;
  TokenStream data(cfg.data.train, cfg.origin.at("data.train") + ": data.train", m.vocab_size);
  Batches batches(data, m.seq_len, "data.train", cfg.data.shuffle, uint64_t(cfg.run.seed));
  Model model(m, uint64_t(cfg.run.seed), be, matmul_setup(cfg), slots);
  model.set_keep_logits(true);
  model.set_recompute(cfg.training.recompute);
  const OneRank one(be);
  std::unique_ptr<QkClip> qk;
  if (cfg.optimizer.qk_clip.enabled) qk = std::make_unique<QkClip>(model, cfg.optimizer.qk_clip, one.groups);
  std::vector<float> exp_avg, exp_avg_sq;  // --from: the checkpoint's optimizer state, which the step continues
  if (!from.empty()) {
    std::vector<float> values;
    load_checkpoint(from, {model.params, values, exp_avg, exp_avg_sq});
    model.params.set_values(values);
  }

  h5::silence_errors();
  h5::Handle f = h5::create_file(path, false);
  h5::write_string_attr(f, "config_toml", cfg.resolved_toml);
  write_param_set(f, "/before/params", model.params, model.params.host_values());
  write_buffers(f, "/before/buffers", model.params);

  const size_t rows = size_t(t.micro_batch) * m.seq_len;
  std::vector<int> all_inputs(size_t(t.global_batch) * m.seq_len), all_targets(all_inputs.size());
  const std::vector<hsize_t> batch_dims{hsize_t(t.global_batch), hsize_t(m.seq_len)};
  // Every micro-batch's tokens also go into the file's batch.
  const FillMicroBatch fill = [&](int mb, std::vector<int>& inputs, std::vector<int>& targets) {
    batches.fill((long long)mb * t.micro_batch, t.micro_batch, inputs, targets);
    std::copy(inputs.begin(), inputs.end(), all_inputs.begin() + mb * rows);
    std::copy(targets.begin(), targets.end(), all_targets.begin() + mb * rows);
  };
  auto write_batch = [&] {
    h5::write_ints(f, "/batch/inputs", all_inputs.data(), batch_dims);
    h5::write_ints(f, "/batch/targets", all_targets.data(), batch_dims);
  };
  if (start_only) {
    std::vector<int> inputs, targets;
    for (int mb = 0; mb < t.global_batch / t.micro_batch; ++mb) fill(mb, inputs, targets);
    write_batch();
    return;
  }
  std::vector<float> logits(all_inputs.size() * m.vocab_size);
  const StepTotals totals = accumulate_gradients(model, t.global_batch, t.micro_batch, fill, [&](int mb, int slot) {
    const std::vector<float> slot_logits = model.logits_to_host(slot);
    std::copy(slot_logits.begin(), slot_logits.end(), logits.begin() + mb * rows * m.vocab_size);
  });
  write_batch();
  h5::write_floats(f, "/logits", logits.data(), {all_inputs.size(), hsize_t(m.vocab_size)});
  write_param_set(f, "/grads", model.params, model.params.host_grads());
  h5::write_double_attr(f, "loss", totals.ce_sum / double(all_inputs.size()));
  h5::write_double_attr(f, "aux_loss", totals.aux);
  h5::write_double_attr(f, "mtp_loss", totals.mtp);

  Optimizer optimizer(model, cfg.optimizer, one.groups, 0);
  if (!from.empty()) {
    optimizer.import_moments(exp_avg, exp_avg_sq);
    write_param_set(f, "/before/exp_avg", model.params, exp_avg);
    write_param_set(f, "/before/exp_avg_sq", model.params, exp_avg_sq);
  }
  const UpdateStats u = apply_update(model, optimizer, cfg, {0, cfg.training.steps}, 0, qk.get());
  if (qk) write_qk_clip(f, *qk, u);
  h5::write_double_attr(f, "grad_norm", u.grad_norm);
  h5::write_double_attr(f, "lr", u.lr);
  const hsize_t moe_layers = moe_layer_count(m);
  if (moe_layers > 0)
    h5::write_floats(f, "/expert_load", u.expert_load.data(), {moe_layers, hsize_t(m.moe.n_routed_experts)});
  write_param_set(f, "/after/params", model.params, model.params.host_values());
  write_buffers(f, "/after/buffers", model.params);
  optimizer.export_moments(exp_avg, exp_avg_sq);
  write_param_set(f, "/after/exp_avg", model.params, exp_avg);
  write_param_set(f, "/after/exp_avg_sq", model.params, exp_avg_sq);
  h5::check(H5Fflush(f, H5F_SCOPE_GLOBAL), "flushing " + path);
}

}  // namespace

void dump_step(const Config& cfg, const std::string& path, bool start_only, const std::string& from) {
  const int slots = slots_needed(cfg.model, cfg.training.global_batch, cfg.training.micro_batch);
  const Device device(choose_device(cfg, slots));
  dump_on(cfg, path, device.choice.backend, slots, start_only, from);
}

}  // namespace mt
