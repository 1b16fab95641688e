#include "train/trainer.hpp"

#include <algorithm>
#include <cstdio>

#include "comm/comm.hpp"
#include "comm/gather_text.hpp"
#include "comm/timed_device_comm.hpp"
#include "parallel/memory_estimate.hpp"
#include "parallel/stages.hpp"
#include "runtime/matmul_setup.hpp"
#include "train/forward_only.hpp"
#include "train/step.hpp"
#include "util/error.hpp"

namespace mt {

Trainer::Trainer(const Config& cfg, TrainOptions opt) : cfg_(cfg), opt_(opt) {
  if (!opt_.world) {
    one_rank_ = make_local_comm();
    opt_.world = one_rank_.get();
  }
  const auto& p = cfg.parallel;
  const auto& t = cfg.training;
  std::vector<StageSpec> stages;
  const int slots = plan_steps();
  runtime_.open(cfg, *opt_.world, slots);
  if (pipelined(schedule_)) stages = stages_of(cfg.model, schedule_.placement, groups_.me.pp);
  // The MoE's shared experts run on a second stream of each chunk, beside the routed experts; not
  // under --profile, which times the ops of one stream.
  const bool side_streams =
      !opt_.profile && cfg.model.moe.n_shared_experts > 0 && cfg.model.n_layers > cfg.model.n_dense_layers;
  if (side_streams && stages.empty()) stages.push_back({0, cfg.model.n_layers, true, true});
  runtime_.open_chunks(stages, side_streams);
  // Every rank computes the same losses and statistics; the first one speaks for all.
  lead_ = opt_.world->rank() == 0;
  if (!lead_) opt_.quiet = true;
  open_data();
  run_dir_ = cfg.run.out_dir + "/" + cfg.run.name;
  layout_ = layout_text(layout_of_config(cfg));
  const ShardPlace shard{.tp_rank = groups_.me.tp, .tp_size = p.tp, .ep_rank = groups_.me.ep, .ep_size = p.ep,
                         .ep_receive_bound = p.ep_receive_bound, .sequence_parallel = p.sequence_parallel,
                         .tp = runtime_.layer_tp(), .ep = runtime_.layer_ep()};
  counters_ = std::make_unique<StepCounters>(runtime_.counters.get(), opt_.check_capture,
                                             CaptureRules{.exchange_downloads = p.ep > 1});
  if (opt_.profile) profile_ = std::make_unique<OpProfile>(device_.backend);
  model_ = std::make_unique<Model>(cfg.model, uint64_t(cfg.run.seed), profile_ ? profile_->backend() : device_.backend,
                                   matmul_setup(cfg), slots, shard, stages);
  model_->set_recompute(t.recompute);
  optimizer_ = std::make_unique<Optimizer>(*model_, cfg.optimizer, groups_, p.zero);
  if (profile_) optimizer_->time_muon_communication();
  scalars_ = std::make_unique<StepScalars>(make_step_scalars(*model_, schedule_, plan_, groups_.me.pp));
  transfers_ = std::make_unique<TransferBuffers>(
        device_.backend, size_t(shard.row_share(t.micro_batch * cfg.model.seq_len)) * cfg.model.d_model);
}

// The members go in reverse order of declaration: the buffers, then the runtime they live on.
Trainer::~Trainer() = default;

// The same eval_sequences windows for every micro-batch size and layout, in micro-batches, the
// last holding the remainder.
double Trainer::evaluate() {
  const int mb = cfg_.training.micro_batch, n = cfg_.training.eval_sequences;
  if (pipelined(schedule_)) {
    auto [sum, tokens] = pipeline_forward_only(
        *model_, schedule_.placement, groups_, n, mb,
        [&](int first, int count, std::vector<int>& inputs, std::vector<int>& targets) {
          val_batches_->fill_spread(first, count, n, inputs, targets);
        },
        *transfers_);
    return sum / double(tokens);
  }
  std::vector<int> in, tg;
  double sum = 0;
  long tokens = 0;
  for (int first = 0; first < n; first += mb) {
    const int count = std::min(mb, n - first);
    val_batches_->fill_spread(first, count, n, in, tg);
    ForwardResult r = model_->forward(0, {in.data(), tg.data(), count}, {.ce = 0.0f, .aux = 0.0f, .backward = false});
    model_->retire(0);
    sum += r.ce_sum;
    tokens += r.tokens;
  }
  return sum / tokens;
}

FallbackCounts Trainer::fallbacks() const {
  // A GPU's streams are backends with counts of their own; a CPU's are the device's backend itself.
  std::vector<Backend> streams{device_.backend};
  for (const std::vector<Backend>* list : {&chunk_streams_, &side_streams_})
    for (const Backend& b : *list)
      if (std::none_of(streams.begin(), streams.end(), [&](const Backend& s) { return s.state == b.state; }))
        streams.push_back(b);
  FallbackCounts mine;
  for (const Backend& b : streams) mine.merge(backend_fallbacks(b));
  FallbackCounts all;
  for (const std::string& text : all_gather_text(*opt_.world, mine.serialize())) all.merge(FallbackCounts::parse(text));
  return all;
}

TrainSummary::Memory Trainer::memory_use() const {
  const ParamStore& params = model_->params;
  const size_t buffers = params.buffers_total();
  // Collective: every rank's figures, in MB (float's digits are plenty for a report).
  const std::vector<float> mine{float(double(optimizer_->weight_floats() + buffers) * sizeof(float) / 1e6),
                                float(double(optimizer_->gradient_floats()) * sizeof(float) / 1e6),
                                float(double(optimizer_->state_floats()) * sizeof(float) / 1e6),
                                float(double(model_->arena_bytes()) / 1e6),
                                float(double(model_->arena_high_water()) / 1e6)};
  std::vector<float> all(mine.size() * size_t(opt_.world->size()));
  opt_.world->all_gather(mine, all);
  std::vector<double> most(mine.size(), 0.0);
  for (size_t i = 0; i < all.size(); ++i) most[i % mine.size()] = std::max(most[i % mine.size()], double(all[i]) * 1e6);
  return {most[0], most[1], most[2], most[3], most[4], resident_high_water_bytes(), device_.host_estimate_bytes};
}

// The step's plan and schedule; returns the activation slots the model needs.
int Trainer::plan_steps() {
  const auto& p = cfg_.parallel;
  const auto& t = cfg_.training;
  plan_ = plan_step(cfg_.model, t.global_batch, t.micro_batch, p.dp,
                    coords_of(layout_of(p, cfg_.model), opt_.world->rank()).dp);
  schedule_ = step_schedule(p, plan_);
  const int slots = pipelined(schedule_) ? schedule_.placement.microbatches_per_flow : plan_.slots();
  // Before anything is allocated: a refusal here leaves nothing to release.
  if (opt_.profile && cfg_.training.cuda_graph)
    throw UserError(cfg_.origin.at("training.cuda_graph") +
                    ": --profile times every op apart, but training.cuda_graph = true replays a pass's ops as one "
                    "graph: profile with training.cuda_graph = false");
  if (opt_.profile && pipelined(schedule_))
    throw UserError(cfg_.origin.at("parallel.schedule") +
                    ": --profile times the ops of one stream, but parallel.pp = " + std::to_string(p.pp) +
                    " with schedule \"" + name_of(p.schedule) +
                    "\" runs a chunk per stream; profile with parallel.pp = 1 and schedule \"1f1b\"");
  return slots;
}

// The training order and the validation windows.
void Trainer::open_data() {
  const Config& cfg = cfg_;
  const auto& t = cfg.training;
  train_data_ = std::make_unique<TokenStream>(cfg.data.train, cfg.origin.at("data.train") + ": data.train",
                                              cfg.model.vocab_size);
  val_data_ = std::make_unique<TokenStream>(cfg.data.val, cfg.origin.at("data.val") + ": data.val",
                                            cfg.model.vocab_size);
  train_batches_ = std::make_unique<Batches>(*train_data_, cfg.model.seq_len, "data.train", cfg.data.shuffle,
                                             uint64_t(cfg.run.seed));
  val_batches_ = std::make_unique<Batches>(*val_data_, cfg.model.seq_len, "data.val");
  if (t.eval_every > 0 && t.eval_sequences > val_batches_->windows())
    throw UserError(cfg.origin.at("training.eval_sequences") + ": training.eval_sequences = " +
                    std::to_string(t.eval_sequences) + " but data.val (" + cfg.data.val + ", " +
                    std::to_string(val_data_->size()) + " tokens) holds " + std::to_string(val_batches_->windows()) +
                    " windows of model.seq_len + 1 = " + std::to_string(cfg.model.seq_len + 1) +
                    " tokens: use at most " + std::to_string(val_batches_->windows()) + ", or more validation data");
  eval_bytes_per_token_ = evaluation_bytes_per_token();
}

}  // namespace mt
