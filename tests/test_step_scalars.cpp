// A training step leaves its scalars on the device: the losses, the balance losses, the gradient
// norm and the expert loads add up in device memory, clipping and AdamW read the norm there, and
// the host waits once, at the end, for one download of all of them. Counted on the strict CPU
// backend (device memory unreadable outside op calls, ops queued as on a stream) through a table
// that counts its downloads, waits and allocations. The token dispatch's downloads of each MoE
// layer's expert counts at ep = 1 (E + 1 ints) are counted apart: they are its own to remove.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "model/model.hpp"
#include "model/step_scalars.hpp"
#include "ops/backend/cpu_ops.hpp"
#include "runtime/one_rank.hpp"
#include "train/accumulate.hpp"
#include "train/update.hpp"
#include "test_helpers.hpp"

namespace {

struct Counts {
  int downloads = 0, waits = 0, allocations = 0;
  int waits_before_download = -1;  // the waits when the first download came
  int expert_counts = 0;           // downloads of expert_count_bytes
};
Counts counts;
size_t expert_count_bytes = 0;
const mt::OpTable* inner = nullptr;

void* counted_alloc(mt::DeviceState* s, size_t n) {
  ++counts.allocations;
  return inner->alloc(s, n);
}
void counted_download(mt::DeviceState* s, void* dst, const void* src, size_t n) {
  if (n == expert_count_bytes) ++counts.expert_counts;
  else if (counts.downloads++ == 0) counts.waits_before_download = counts.waits;
  inner->download(s, dst, src, n);
}
void counted_synchronize(mt::DeviceState* s) {
  ++counts.waits;
  inner->synchronize(s);
}
double counted_mark_seconds(mt::DeviceState* s, void* from, void* to) {
  ++counts.waits;
  return inner->mark_seconds(s, from, to);
}

// The strict CPU backend with its memory entries counted.
struct CountingDevice {
  testing::StrictDevice strict;
  mt::OpTable table;
  mt::Backend be;
  explicit CountingDevice(const mt::ModelConfig& m) : table(*strict.be.ops), be{&table, strict.be.state} {
    inner = strict.be.ops;
    expert_count_bytes = size_t(m.moe.n_routed_experts + 1) * sizeof(int);
    table.alloc = counted_alloc;
    table.download = counted_download;
    table.synchronize = counted_synchronize;
    table.mark_seconds = counted_mark_seconds;
  }
};

// DeepSeek-V3's structure in small: MLA, grouped routing, a sequence-wise balance loss, MTP.
mt::Config small_config() {
  mt::Config cfg;
  cfg.model = testing::tiny_model();
  cfg.model.attention.kind = mt::AttentionKind::mla;
  cfg.model.attention.kv_lora_rank = 6;
  cfg.model.attention.qk_nope_head_dim = 4;
  cfg.model.attention.qk_rope_head_dim = 2;
  cfg.model.attention.v_head_dim = 3;
  cfg.model.mtp.depth = 1;
  cfg.training.global_batch = 4;
  cfg.training.micro_batch = 2;
  cfg.training.grad_clip = 0.5;  // clips: the norm is larger
  return cfg;
}

struct Trained {
  mt::Config cfg;
  std::vector<int> inputs, targets;
  mt::FillMicroBatch fill() const {
    const int n = cfg.training.micro_batch * cfg.model.seq_len;
    return [this, n](int mb, std::vector<int>& in, std::vector<int>& tg) {
      in.assign(inputs.begin() + mb * n, inputs.begin() + (mb + 1) * n);
      tg.assign(targets.begin() + mb * n, targets.begin() + (mb + 1) * n);
    };
  }
};

Trained trained(const mt::Config& cfg) {
  const size_t tokens = size_t(cfg.training.global_batch) * cfg.model.seq_len;
  return {cfg, testing::random_tokens(tokens, cfg.model.vocab_size, 11),
          testing::random_tokens(tokens, cfg.model.vocab_size, 12)};
}

}  // namespace

TEST_CASE("a step's forward and backward and its update download once each, and never wait otherwise") {
  const Trained t = trained(small_config());
  CountingDevice dev(t.cfg.model);
  const auto& tc = t.cfg.training;
  mt::Model model(t.cfg.model, 7, dev.be, {}, mt::slots_needed(t.cfg.model, tc.global_batch, tc.micro_batch));
  const mt::OneRank one(dev.be);
  mt::Optimizer optimizer(model, t.cfg.optimizer, one.groups, 0);
  for (int step = 0; step < 2; ++step) {
    counts = {};
    mt::accumulate_gradients(model, tc.global_batch, tc.micro_batch, t.fill());
    CHECK(counts.downloads == 1);
    CHECK(counts.waits_before_download == 0);  // the passes' timers are read after it
    counts = {};
    const mt::UpdateStats u = mt::apply_update(model, optimizer, t.cfg, {0, 10}, step);
    CHECK(u.applied);
    CHECK(counts.downloads == 1);
    CHECK(counts.waits_before_download == 0);  // its timer of the gradient sums is read after it
  }
}

TEST_CASE("after the first step a training step downloads its scalars once and allocates nothing") {
  const Trained t = trained(small_config());
  CountingDevice dev(t.cfg.model);
  const auto& tc = t.cfg.training;
  const mt::StepPlan plan = mt::plan_step(t.cfg.model, tc.global_batch, tc.micro_batch);
  mt::Model model(t.cfg.model, 7, dev.be, {}, plan.slots());
  const mt::OneRank one(dev.be);
  mt::Optimizer optimizer(model, t.cfg.optimizer, one.groups, 0);
  const mt::pipeline::Schedule schedule = mt::step_schedule(mt::ParallelConfig{}, plan);
  mt::StepScalars scalars = mt::make_step_scalars(model, schedule, plan, 0);
  mt::TransferBuffers buffers(dev.be, size_t(tc.micro_batch) * t.cfg.model.seq_len * t.cfg.model.d_model);
  mt::DeviceTimer sync_time(dev.be);
  std::vector<double> norms;
  for (int step = 0; step < 3; ++step) {
    counts = {};
    double lr = 0;
    const mt::StepTotals totals = mt::run_step(model, schedule, one.groups, plan, t.fill(), buffers, scalars, {}, [&] {
      model.settle_arenas();
      lr = mt::queue_update(model, optimizer, t.cfg, {0, 10}, step, scalars, sync_time);
    });
    if (step > 0) {
      CHECK(counts.downloads == 1);
      CHECK(counts.allocations == 0);
    }
    CHECK(counts.waits_before_download == 0);  // the timers are read after it
    const mt::UpdateStats u = mt::update_record(model, optimizer, t.cfg, scalars, lr);
    CHECK(u.applied);
    CHECK(std::isfinite(totals.ce_sum));
    CHECK(totals.aux > 0);
    CHECK(totals.mtp > 0);
    norms.push_back(u.grad_norm);
    CHECK(u.grad_norm > tc.grad_clip);
    sync_time.take_seconds();
  }
}

TEST_CASE("a step whose loss is not finite changes no weight, moment or bias, decided on the device") {
  testing::StrictDevice dev;
  mt::Config cfg = small_config();
  cfg.model.moe.bias_update_speed = 0.25;
  const Trained t = trained(cfg);
  const auto& tc = t.cfg.training;
  mt::Model model(t.cfg.model, 7, dev.be, {}, mt::slots_needed(t.cfg.model, tc.global_batch, tc.micro_batch));
  const mt::OneRank one(dev.be);
  mt::Optimizer optimizer(model, t.cfg.optimizer, one.groups, 0);
  // A logit of +infinity: the loss is NaN on every row that sees it, the gradient too.
  std::vector<float> values = model.params.host_values();
  values[model.params.info(model.head).offset] = INFINITY;
  model.params.set_values(values);
  const std::vector<float> biases = model.params.host_buffer(model.moe_layers()[0]->router().bias);
  mt::accumulate_gradients(model, tc.global_batch, tc.micro_batch, t.fill());
  const mt::UpdateStats u = mt::apply_update(model, optimizer, t.cfg, {0, 10}, 0);
  CHECK_FALSE(u.applied);
  const std::vector<float> after = model.params.host_values();
  size_t changed = 0;
  for (size_t i = 0; i < values.size(); ++i) changed += std::memcmp(&after[i], &values[i], sizeof(float)) != 0;
  CHECK(changed == 0);
  std::vector<float> m, v;
  optimizer.export_moments(m, v);
  size_t moved = 0;
  for (size_t i = 0; i < m.size(); ++i) moved += m[i] != 0.0f || v[i] != 0.0f;
  CHECK(moved == 0);
  CHECK(model.params.host_buffer(model.moe_layers()[0]->router().bias) == biases);
}

TEST_CASE("clipping, AdamW and the bias update read the step's norm and loss check from device memory") {
  const std::vector<float> g{3.0f, -4.0f};
  auto clipped = [&](double norm_sq, double clip) {
    std::vector<float> x = g;
    mt::cpu::scale(nullptr, {.n = x.size(), .x = x.data(), .norm_sq = &norm_sq, .clip = clip});
    return x;
  };
  CHECK(clipped(25.0, 1.0) == std::vector<float>{0.6f, -0.8f});  // norm 5 clipped to 1
  CHECK(clipped(25.0, 5.0) == g);                                // at the limit: unchanged
  CHECK(clipped(NAN, 1.0) == g);
  CHECK(clipped(INFINITY, 1.0) == g);

  // The loss check: 0 times each loss, NaN once one is not finite.
  const std::vector<double> losses{2.5, INFINITY};
  double check = 0.0;
  mt::cpu::sum_scalars(nullptr, {.n = 1, .x = losses.data(), .scale = 0.0, .sum = &check});
  CHECK(check == 0.0);
  mt::cpu::sum_scalars(nullptr, {.n = 2, .x = losses.data(), .scale = 0.0, .sum = &check});
  CHECK(std::isnan(check));

  for (const std::vector<double>& guard : {std::vector<double>{1.0, 0.0}, {1.0, NAN}, {INFINITY, 0.0}, {NAN, 0.0}}) {
    const bool passes = std::isfinite(guard[0]) && std::isfinite(guard[1]);
    CAPTURE(guard[0]);
    CAPTURE(guard[1]);
    std::vector<float> value{1.0f, 2.0f}, m{0.0f, 0.0f}, v{0.0f, 0.0f};
    const mt::AdamwStepValues step{.lr = 0.1};
    mt::cpu::adamw(nullptr, {.n = 2, .step = &step, .grad = g.data(), .value = value.data(), .m = m.data(),
                             .v = v.data(), .guard = guard.data()});
    CHECK((value != std::vector<float>{1.0f, 2.0f}) == passes);
    const std::vector<double> load{1, 3};
    std::vector<float> bias{0.0f, 0.0f};
    mt::cpu::bias_update(nullptr, {.experts = 2, .gamma = 0.5f, .load = load.data(), .bias = bias.data(),
                                   .guard = guard.data()});
    CHECK(bias == (passes ? std::vector<float>{0.5f, -0.5f} : std::vector<float>{0.0f, 0.0f}));
  }
}
