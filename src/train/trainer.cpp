#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fcntl.h>
#include <unistd.h>

#include "comm/comm.hpp"
#include "comm/gather_text.hpp"
#include "comm/timed_device_comm.hpp"
#include "io/bpe.hpp"
#include "io/checkpoint.hpp"
#include "io/run_lock.hpp"
#include "io/run_log.hpp"
#include "train/update.hpp"
#include "parallel/stages.hpp"
#include "train/batches.hpp"
#include "train/memory_estimate.hpp"
#include "train/forward_only.hpp"
#include "train/step.hpp"
#include "train/resume.hpp"
#include "train/progress.hpp"
#include "model/flops.hpp"
#include "util/error.hpp"
#include "util/format.hpp"

namespace mt {

namespace {

// The learning-rate cycle a resumed run follows (lr_schedule.extend), into `state`. Returns, when it trains past
// the end of a decay, what the learning rate does there.
std::string resume_lr_cycle(const Config& cfg, const Resumed& r, TrainState& state) {
  long long saved_steps = cfg.training.steps;
  for (const ConfigChange& c : r.changes)
    if (c.key == "training.steps") saved_steps = std::stoll(c.before);
  const LrCycle saved{state.lr_start, state.lr_end};
  const LrCycle cycle = resumed_lr_cycle(cfg, saved, saved_steps, state.step, r.dir);
  state.lr_start = cycle.start;
  state.lr_end = cycle.end;
  const long long decay_end = saved.end > 0 ? saved.end : saved_steps;
  if (cfg.lr_schedule.kind != "cosine" || state.step < decay_end || state.step >= cfg.training.steps) return "";
  return cycle.start == state.step
      ? "warms up again and decays to step " + std::to_string(cycle.end) + " (lr_schedule.extend = \"rewarm\")"
      : "held at " + format_number("%.2e", learning_rate(cfg, cycle, state.step)) + " after step " +
            std::to_string(cycle.end) + " (lr_schedule.extend = \"constant\")";
}

// Set by SIGINT, SIGTERM or SIGUSR1: the loop finishes the step, writes a checkpoint and stops.
// A signal handler can only reach static storage, hence the process-wide flag and the notice the
// first rank writes at once (write(2) is all a handler may call), before the step ends.
volatile std::sig_atomic_t g_stop_requested = 0;
char g_stop_notice[640];
size_t g_stop_notice_size = 0;
bool g_under_mpirun = false;
void request_stop(int) {
  // mpirun stops reading the ranks' output once Ctrl-C has reached it, so a rank blocked in a
  // write to a full pipe would never reach the stop vote: its output stops blocking (what it
  // writes from here may be lost; the checkpoint is not).
  if (g_under_mpirun)
    for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
      const int flags = fcntl(fd, F_GETFL);
      if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    }
  if (!g_stop_requested && g_stop_notice_size > 0) (void)!write(2, g_stop_notice, g_stop_notice_size);
  g_stop_requested = 1;
}

// What the notice says: under mpirun, Ctrl-C reaches the ranks as SIGTERM and SIGKILL follows
// odls_base_sigkill_timeout seconds later (docs/failures.md), while SIGUSR1 is passed on alone.
void prepare_stop_notice(bool final_checkpoint) {
  std::string text = std::string("moetrain: stop requested: finishing the step in progress") +
                     (final_checkpoint ? ", then writing a checkpoint" : "") + "\n";
  g_under_mpirun = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  if (g_under_mpirun)
    text += "moetrain: under mpirun, Ctrl-C or SIGTERM is followed by SIGKILL odls_base_sigkill_timeout seconds later "
            "(1 by default): when a step takes longer, stop with kill -USR1 <mpirun's pid>, or start mpirun with "
            "--mca odls_base_sigkill_timeout 60\n";
  g_stop_notice_size = std::min(text.size(), sizeof g_stop_notice);
  std::memcpy(g_stop_notice, text.data(), g_stop_notice_size);
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Why the run stops at `step`, what was kept, and how to continue from before the divergence:
// `kept` lists the complete checkpoints, newest first, each with its loss where this run logged it.
std::string non_finite_message(long long step, double loss, double grad_norm,
                               const std::vector<std::pair<std::string, std::string>>& kept) {
  char what[96];
  if (!std::isfinite(loss)) std::snprintf(what, sizeof what, "the loss is %g", loss);
  else std::snprintf(what, sizeof what, "the gradient norm is %g (loss %.4f)", grad_norm, loss);
  std::string text = "step " + std::to_string(step) + ": " + what + "; this step was not applied or saved, and ";
  if (kept.empty())
    return text + "no checkpoint was written before it. Training is deterministic, so running the same command again "
                  "stops here again: lower optimizer.lr or set training.grad_clip (e.g. --set optimizer.lr=...), and "
                  "the run starts again from step 0";
  text += "the newest checkpoint, " + kept[0].first + ", is from before it" + kept[0].second +
          ". Training is deterministic, so running the same command again stops here again. With a lower optimizer.lr "
          "or training.grad_clip (e.g. --set optimizer.lr=...) the run continues from that checkpoint; but a loss "
          "often rises for many steps before it overflows, so it may already hold diverging weights";
  if (kept.size() == 1) return text + ": then start afresh with checkpoint.resume = \"never\" or a new run.name";
  std::string moves;
  for (size_t i = 0; i + 1 < kept.size(); ++i)
    moves += (i ? "; mv " : "mv ") + kept[i].first + " " + kept[i].first + ".diverged";
  return text + ". To continue from the oldest kept, " + kept.back().first + kept.back().second +
         ", move the newer ones out of the way (" + moves + ": only folders named step_<N> are resumed from) and run "
         "again with the lower optimizer.lr";
}

}  // namespace

Trainer::Trainer(const Config& cfg, TrainOptions opt) : cfg_(cfg), opt_(opt) {
  if (!opt_.world) {
    one_rank_ = make_local_comm();
    opt_.world = one_rank_.get();
  }
  const auto& p = cfg.parallel;
  const auto& t = cfg.training;
  std::vector<StageSpec> stages;
  plan_ = plan_step(cfg.model, t.global_batch, t.micro_batch, p.dp,
                    coords_of(layout_of(p, cfg.model), opt_.world->rank()).dp);
  schedule_ = step_schedule(p, plan_);
  const int slots = pipelined(schedule_) ? schedule_.placement.microbatches_per_flow : plan_.slots();
  // Before anything is allocated: a refusal here leaves nothing to release.
  if (opt_.profile && pipelined(schedule_))
    throw UserError(cfg.origin.at("parallel.schedule") + ": --profile times the ops of one stream, but parallel.pp = " +
                    std::to_string(p.pp) + " with schedule \"" + name_of(p.schedule) +
                    "\" runs a chunk per stream; profile with parallel.pp = 1 and schedule \"1f1b\"");
  // A missing NCCL needs no device to find: it stops the run before any device work.
  require_nccl_if_asked(cfg);
  device_ = choose_device(cfg, slots);
  // Every rank takes part; only the first prints them.
  rank_devices_ = all_gather_text(*opt_.world, device_.description);
  transport_ = choose_transport(cfg, device_, *opt_.world);
  groups_ = make_groups(*opt_.world, layout_of(p, cfg.model), device_.backend, transport_.transport);
  if (pipelined(schedule_)) stages = stages_of(cfg.model, schedule_.placement, groups_.me.pp);
  // Each chunk computes on its own stream and talks over its own tensor- and expert-parallel
  // communicators, ordered after that stream (DualPipe runs two chunks' passes at once), each timed
  // into its own counters. The first chunk uses the device's first stream and the groups' own.
  const size_t chunks = std::max<size_t>(1, stages.size());
  comm_seconds_.resize(chunks);
  chunk_streams_.assign(chunks, device_.backend);
  for (size_t c = 1; c < chunks; ++c) chunk_streams_[c] = open_stream(device_);
  for (size_t c = 0; c < chunks; ++c)
    comm_timers_.push_back({std::make_unique<DeviceTimer>(chunk_streams_[c]), std::make_unique<DeviceTimer>(chunk_streams_[c])});
  // The layers' communication is timed; the optimizer's sums over the same groups are the gradient
  // sum's time, so it keeps the untimed communicators.
  chunk_comms_.push_back(make_timed_device_comm(*groups_.dev.tp, &comm_seconds_[0].tp, comm_timers_[0].tp.get()));
  DeviceComm* layer_tp = chunk_comms_.back().get();
  chunk_comms_.push_back(make_timed_device_comm(*groups_.dev.ep, &comm_seconds_[0].ep, comm_timers_[0].ep.get()));
  DeviceComm* layer_ep = chunk_comms_.back().get();
  auto chunk_comm = [&](DeviceComm& group, size_t c, double* seconds, DeviceTimer* timer) {
    chunk_comms_.push_back(make_timed_device_comm(group.split_on(chunk_streams_[c], 0, group.rank()), seconds, timer));
    return chunk_comms_.back().get();
  };
  // The MoE's shared experts run on a second stream of each chunk, beside the routed experts; not
  // under --profile, which times the ops of one stream.
  if (!opt_.profile && cfg.model.moe.n_shared_experts > 0 && cfg.model.n_layers > cfg.model.n_dense_layers) {
    if (stages.empty()) stages.push_back({0, cfg.model.n_layers, true, true});
    for (size_t c = 0; c < chunks; ++c) side_streams_.push_back(open_stream(device_));
    for (size_t c = 0; c < chunks; ++c) stages[c].side = &side_streams_[c];
  }
  for (size_t c = 1; c < stages.size(); ++c) {
    stages[c].backend = &chunk_streams_[c];
    stages[c].tp = chunk_comm(*groups_.dev.tp, c, &comm_seconds_[c].tp, comm_timers_[c].tp.get());
    stages[c].ep = chunk_comm(*groups_.dev.ep, c, &comm_seconds_[c].ep, comm_timers_[c].ep.get());
  }
  // Every rank computes the same losses and statistics; the first one speaks for all.
  lead_ = opt_.world->rank() == 0;
  if (!lead_) opt_.quiet = true;
  train_data_ = std::make_unique<TokenStream>(cfg.data.train, cfg.origin.at("data.train") + ": data.train", cfg.model.vocab_size);
  val_data_ = std::make_unique<TokenStream>(cfg.data.val, cfg.origin.at("data.val") + ": data.val", cfg.model.vocab_size);
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
  run_dir_ = cfg.run.out_dir + "/" + cfg.run.name;
  layout_ = layout_text(layout_of_config(cfg));
  const ShardPlace shard{.tp_rank = groups_.me.tp, .tp_size = p.tp, .ep_rank = groups_.me.ep, .ep_size = p.ep,
                         .sequence_parallel = p.sequence_parallel, .tp = layer_tp, .ep = layer_ep};
  if (opt_.profile) profile_ = std::make_unique<OpProfile>(device_.backend);
  model_ = std::make_unique<Model>(cfg.model, uint64_t(cfg.run.seed), profile_ ? profile_->backend() : device_.backend,
                                   matmul_setup(cfg), slots, shard, stages);
  model_->set_recompute(t.recompute);
  optimizer_ = std::make_unique<Optimizer>(*model_, cfg.optimizer, groups_, p.zero);
  transfers_ = std::make_unique<TransferBuffers>(
        device_.backend, size_t(shard.row_share(t.micro_batch * cfg.model.seq_len)) * cfg.model.d_model);
}

Trainer::~Trainer() {
  // Every buffer goes back to the backend before the backend itself.
  optimizer_.reset();
  model_.reset();
  transfers_.reset();
  profile_.reset();
  // NCCL communicators live on the backend's GPU and stream: they go before it too.
  chunk_comms_.clear();
  // Children before the world communicator they were split from.
  auto& d = groups_.dev;
  for (auto* c : {&d.embedding, &d.mirror, &d.pp, &d.expert_replicas, &d.ep, &d.dp, &d.tp, &d.world}) c->reset();
  comm_timers_.clear();
  for (size_t c = 1; c < chunk_streams_.size(); ++c) close_stream(device_, chunk_streams_[c]);
  for (Backend& s : side_streams_) close_stream(device_, s);
  release_device(device_);
}

void Trainer::print_header() const {
  const auto& m = cfg_.model;
  std::printf("moetrain: run %s -> %s\n", cfg_.run.name.c_str(), run_dir_.c_str());
  // One line for ranks that all run on the same kind of device, else one per rank (each its own GPU).
  if (std::all_of(rank_devices_.begin(), rank_devices_.end(), [&](const std::string& d) { return d == rank_devices_[0]; })) {
    const std::string who = rank_devices_.size() > 1 ? "all " + std::to_string(rank_devices_.size()) + " ranks: " : "";
    std::printf("  device   %s%s\n", who.c_str(), device_.description.c_str());
  } else {
    for (size_t r = 0; r < rank_devices_.size(); ++r)
      std::printf("  %s rank %3zu: %s\n", r == 0 ? "device  " : "        ", r, rank_devices_[r].c_str());
  }
  if (transport_.transport == DeviceTransport::nccl)
    std::printf("  comm     NCCL between the GPUs, MPI for counts and scalars\n");
  else if (groups_.layout.world() > 1) {
    const std::string why = transport_.no_nccl.empty() ? "" : " (auto: " + transport_.no_nccl + ")";
    std::printf("  comm     MPI; device payloads %s%s\n",
                device_.backend.host_addressable() ? "handed to it in place (CPU memory)" : "staged through host memory",
                why.c_str());
  }
  if (groups_.layout.world() > 1 || pipelined(schedule_)) {
    std::printf("  layout   %s: each data-parallel rank runs %d micro-batches of each step\n", layout_.c_str(),
                plan_.micro_batches);
    if (groups_.layout.world() > 1) std::printf("%s", placement_text(groups_.layout, m.moe.n_routed_experts).c_str());
  }
  if (pipelined(schedule_)) {
    // The cut by FLOPs (pipeline_cut): a stage's layers, the last with the head (and MTP).
    const std::vector<int> cut = pipeline_cut(m, schedule_.placement.stages);
    std::string stages;
    for (size_t s = 0; s + 1 < cut.size(); ++s)
      stages += (s ? ", " : "") + std::to_string(cut[s + 1] - cut[s]);
    std::printf("  stages   %zu, of %s layers (the last also the head%s)\n", cut.size() - 1, stages.c_str(),
                m.mtp.depth > 0 ? " and MTP" : "");
  }
  const auto& a = m.attention;
  char attention[96];
  if (a.kind == "mla")
    std::snprintf(attention, sizeof attention, "MLA %d heads (qk %d+%d, v %d, kv rank %d, q rank %d)", m.n_heads,
                  a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim, a.kv_lora_rank, a.q_lora_rank);
  else
    std::snprintf(attention, sizeof attention, "MHA %d heads x %d (%d kv heads)", m.n_heads, m.head_dim,
                  a.n_kv_heads ? a.n_kv_heads : m.n_heads);
  std::printf("  model    %d layers (%d dense, %d MoE), d_model %d, %s, %d routed experts (top %d) + %d shared\n",
              m.n_layers, m.n_dense_layers, m.n_layers - m.n_dense_layers, m.d_model, attention,
              m.moe.n_routed_experts, m.moe.top_k, m.moe.n_shared_experts);
  std::printf("  params   %.3fM total, %.3fM active per token; %.2f MFLOP per token (training)\n",
              total_params(m) / 1e6, active_matmul_params(m) / 1e6, training_flops_per_token(m) / 1e6);
  std::printf("  data     %zu train tokens (%zu files), %zu val tokens; unigram entropy %.3f nats\n",
              train_data_->size(), train_data_->files().size(), val_data_->size(), train_data_->unigram_entropy());
  std::printf("           %s; validation: %d sequences spread over its stream\n", data_order_text().c_str(),
              cfg_.training.eval_sequences);
  std::printf("  batch    %d sequences x %d tokens per step, %d micro-batches of %d\n", cfg_.training.global_batch,
              m.seq_len, cfg_.training.global_batch / cfg_.training.micro_batch, cfg_.training.micro_batch);
}

// "shuffled by sequence (run.seed 1234); 300 steps read 614k tokens, 0.25 of an epoch".
std::string Trainer::data_order_text() const {
  const auto& t = cfg_.training;
  const double sequences = double(t.steps) * t.global_batch, tokens = sequences * cfg_.model.seq_len;
  char amount[96];
  if (tokens >= 1e9) std::snprintf(amount, sizeof amount, "%.3gG", tokens / 1e9);
  else if (tokens >= 1e6) std::snprintf(amount, sizeof amount, "%.3gM", tokens / 1e6);
  else if (tokens >= 1e4) std::snprintf(amount, sizeof amount, "%.3gk", tokens / 1e3);
  else std::snprintf(amount, sizeof amount, "%.0f", tokens);
  const std::string order = cfg_.data.shuffle ? "shuffled by sequence (run.seed " + std::to_string(cfg_.run.seed) + ")"
                                              : "in file order";
  char line[256];
  std::snprintf(line, sizeof line, "%s; %d steps read %s tokens, %.3g of an epoch", order.c_str(), t.steps, amount,
                sequences / double(train_batches_->windows()));
  return line;
}

// The bytes of text the evaluation's target tokens stand for, per token: an eval loss in bits per
// byte compares runs of any tokenizer.
double Trainer::evaluation_bytes_per_token() const {
  const std::vector<size_t> bytes = token_bytes_of_shards(val_data_->files().front(), cfg_.model.vocab_size);
  std::vector<int> in, tg;
  double total = 0, tokens = 0;
  const int n = cfg_.training.eval_sequences;
  for (int first = 0; first < n; first += cfg_.training.micro_batch) {
    val_batches_->fill_spread(first, std::min(cfg_.training.micro_batch, n - first), n, in, tg);
    for (int t : tg)
      if (t >= 0) total += double(bytes[size_t(t)]), tokens += 1;
  }
  return tokens > 0 ? total / tokens : 0;
}

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
    ForwardResult r = model_->forward(0, {in.data(), tg.data(), count}, {0.0f, 0.0f});
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
                                float(double(model_->arena_bytes()) / 1e6), float(double(model_->arena_high_water()) / 1e6)};
  std::vector<float> all(mine.size() * size_t(opt_.world->size()));
  opt_.world->all_gather(mine, all);
  std::vector<double> most(mine.size(), 0.0);
  for (size_t i = 0; i < all.size(); ++i) most[i % mine.size()] = std::max(most[i % mine.size()], double(all[i]) * 1e6);
  return {most[0], most[1], most[2], most[3], most[4], resident_high_water_bytes(), device_.host_estimate_bytes};
}

TrainSummary Trainer::run() {
  const auto& t = cfg_.training;
  const auto& m = cfg_.model;
  TrainSummary summary;
  summary.unigram_entropy = train_data_->unigram_entropy();
  ParamStore& params = model_->params;
  const double flops_per_token = training_flops_per_token(m);

  TrainState state;
  std::error_code ec;
  std::filesystem::create_directories(run_dir_, ec);
  if (ec) throw UserError(run_dir_ + ": cannot create the run directory: " + ec.message());
  std::optional<RunLock> lock;
  if (lead_) lock.emplace(run_dir_);
  // The run keeps its tokenizer, so that `moetrain sample` reads the run's text whatever happens
  // to the shards' directory.
  const std::string tokenizer = tokenizer_beside(train_data_->files().front());
  if (lead_ && std::filesystem::exists(tokenizer)) {
    std::filesystem::copy_file(tokenizer, run_dir_ + "/tokenizer.bpe", std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) throw UserError(run_dir_ + "/tokenizer.bpe: cannot copy " + tokenizer + " there: " + ec.message());
  }
  state.lr_end = t.steps;
  std::optional<std::string> resume_from;
  std::string resume_changes, resume_layout, resume_lr;
  {
    std::vector<float> values, exp_avg, exp_avg_sq;
    if (std::optional<Resumed> r =
            resume_checkpoint(run_dir_, cfg_.checkpoint.resume, {params, values, exp_avg, exp_avg_sq},
                              {cfg_.resolved_toml, cfg_.origin}, *opt_.world)) {
      resume_from = r->dir;
      state = r->state;
      resume_changes = changes_line(state.step, r->changes);
      resume_lr = resume_lr_cycle(cfg_, *r, state);
      resume_layout = r->layout;
      optimizer_->import_values(values);
      optimizer_->import_moments(exp_avg, exp_avg_sq);
    }
  }
  if (resume_from && state.seed != cfg_.run.seed)
    throw UserError(cfg_.origin.at("run.seed") + ": run.seed = " + std::to_string(cfg_.run.seed) + " but " +
                    *resume_from + " was trained with seed " + std::to_string(state.seed) +
                    "; use the same seed, or a new run.name / checkpoint.resume = \"never\" for a fresh run");
  state.seed = cfg_.run.seed;
  // --profile times the steps this command trains: with none left it would print an empty table.
  const long long until = opt_.stop_after > 0 ? std::min<long long>(opt_.stop_after, t.steps) : t.steps;
  if (profile_ && state.step >= until)
    throw UserError("--profile: " + *resume_from + " holds step " + std::to_string(state.step) + " and this run " +
                    (until < t.steps ? "stops at --stop-after " + std::to_string(until)
                                     : "trains to training.steps = " + std::to_string(t.steps)) +
                    ": no step is left to time. Profile a run of its own, e.g. --set run.name=\"" + cfg_.run.name +
                    "-profile\" --set training.steps=5, or raise training.steps to time the added steps");
  if (state.step >= t.steps && !opt_.quiet)
    std::printf("moetrain: %s already holds step %lld of %d; nothing to train\n", resume_from->c_str(), state.step, t.steps);

  if (!opt_.quiet) {
    print_header();
    if (resume_from) {
      std::printf("  resume   from %s (step %lld)%s\n", resume_from->c_str(), state.step,
                  resume_layout == layout_ ? "" : ("; written under " + resume_layout).c_str());
      if (!resume_changes.empty())
        std::printf("  changed  %s (recorded in log.h5: config_changes)\n", resume_changes.c_str());
      if (!resume_lr.empty()) std::printf("  lr       %s\n", resume_lr.c_str());
    }
    // A log without a checkpoint: an earlier run under checkpoint.final = false, or one stopped
    // before its first checkpoint. Say that this one starts over rather than continuing it.
    else if (cfg_.checkpoint.resume == "auto" && std::filesystem::exists(run_dir_ + "/log.h5"))
      std::printf("  resume   none: %s has a log.h5 but no checkpoint; training starts at step 0 and log.h5 starts over\n",
                  run_dir_.c_str());
  }
  // Named when a signal stops the run.
  std::string last_checkpoint = resume_from ? *resume_from : "";
  RunFacts facts;
  facts.config_toml = cfg_.resolved_toml;
  facts.numbers = {{"total_params", total_params(m)}, {"active_params", active_matmul_params(m)},
                   {"flops_per_token", flops_per_token}, {"unigram_entropy", summary.unigram_entropy},
                   {"eval_bytes_per_token", eval_bytes_per_token_}};
  facts.texts = {{"device", device_.description}, {"layout", layout_}, {"data_order", data_order_text()}};
  facts.moe_layers = moe_layer_count(m);
  facts.ranks = opt_.world->size();
  facts.experts = m.moe.n_routed_experts;
  facts.config_change = resume_changes;
  std::optional<RunLog> log;
  if (lead_) log.emplace(run_dir_ + "/log.h5", facts, state.step);
  std::optional<Progress> progress;
  if (!opt_.quiet) progress.emplace(cfg_.log.progress, cfg_.log.every);

  const long tokens_per_step = long(t.global_batch) * m.seq_len;
  const double peak = (cfg_.precision.peak_tflops > 0 ? cfg_.precision.peak_tflops : device_.peak_tflops) * 1e12;
  const long long last = opt_.stop_after > 0 ? std::min<long long>(opt_.stop_after, t.steps) : t.steps;

  g_stop_requested = 0;
  g_stop_notice_size = 0;
  if (lead_) prepare_stop_notice(cfg_.checkpoint.final);
  auto old_int = std::signal(SIGINT, request_stop);
  auto old_term = std::signal(SIGTERM, request_stop);
  auto old_usr1 = std::signal(SIGUSR1, request_stop);
  summary.first_step = state.step;
  const auto run_start = Clock::now();
  double tokens_done = 0;

  while (state.step < last) {
    const auto step_start = Clock::now();
    // What the layers' communicators did since the last step (an evaluation) is not this step's.
    for (CommSeconds& c : comm_seconds_) c = {};
    for (CommTimers& t : comm_timers_) t.tp->take_seconds(), t.ep->take_seconds();
    StepRecord rec;
    const FillMicroBatch fill = [&](int mb, std::vector<int>& inputs, std::vector<int>& targets) {
      try {
        train_batches_->fill(state.samples_seen + plan_.first_sample(mb), t.micro_batch, inputs, targets);
      } catch (const ShardChanged& e) {
        throw UserError(std::string(e.what()) + "; step " + std::to_string(state.step + 1) + " stopped before " +
                        "its update, and " + (last_checkpoint.empty() ? "no checkpoint was written before it"
                                                                      : "the newest checkpoint is " + last_checkpoint) +
                        ": with the shard restored, the same command resumes there");
      }
    };
    const StepTotals totals = run_step(*model_, schedule_, groups_, plan_, fill, *transfers_);
    CommSeconds in_layers;
    for (size_t c = 0; c < comm_seconds_.size(); ++c) {
      in_layers.tp += comm_seconds_[c].tp + comm_timers_[c].tp->take_seconds();
      in_layers.ep += comm_seconds_[c].ep + comm_timers_[c].ep->take_seconds();
    }
    const auto t_opt = Clock::now();
    rec.loss = totals.ce_sum / double(tokens_per_step);
    rec.aux_loss = totals.aux;
    rec.mtp_loss = totals.mtp;
    UpdateStats update;
    model_->settle_arenas();
    if (std::isfinite(rec.loss))
      update = apply_update(*model_, *optimizer_, cfg_, {state.lr_start, state.lr_end}, state.step);
    if (!std::isfinite(rec.loss) || !update.applied) {
      std::vector<std::pair<std::string, std::string>> kept;
      for (const std::string& dir : complete_checkpoints(run_dir_)) {
        const long long at = checkpoint_step(dir) - summary.first_step;  // its row in this run's losses
        char loss_text[64] = "";
        if (at >= 1 && at <= (long long)summary.losses.size())
          std::snprintf(loss_text, sizeof loss_text, " (loss %.4f there)", summary.losses[size_t(at - 1)]);
        kept.push_back({dir, loss_text});
      }
      throw UserError(non_finite_message(state.step + 1, rec.loss, update.grad_norm, kept));
    }
    rec.grad_norm = update.grad_norm;
    rec.lr = update.lr;
    rec.expert_load = std::move(update.expert_load);
    rec.expert_bias = std::move(update.expert_bias);
    state.step++;
    state.samples_seen += t.global_batch;
    rec.step = state.step;
    rec.time_forward = totals.t_forward;
    rec.time_backward = totals.t_backward;
    rec.time_optimizer = seconds_since(t_opt);
    rec.time_step = seconds_since(step_start);
    rec.tokens_per_s = tokens_per_step / rec.time_step;
    rec.flops_per_s = rec.tokens_per_s * flops_per_token;
    const std::vector<float> phases{float(totals.t_forward + totals.t_backward + totals.t_overlapped),
                                    float(in_layers.tp), float(in_layers.ep), float(totals.t_pipeline_wait),
                                    float(update.time_grad_sync), float(rec.time_optimizer - update.time_grad_sync),
                                    float(rec.time_step)};
    rec.rank_phases.resize(size_t(kPhases) * opt_.world->size());
    opt_.world->all_gather(phases, rec.rank_phases);
    rec.mfu = peak > 0 ? rec.flops_per_s / peak : NAN;
    if (log) log->append(rec);
    if (profile_) {
      // The first step of a run warms caches and allocators: the mean leaves it out when others follow.
      const std::vector<OpKindTime> ops = profile_->take();
      if (profiled_steps_++ == 0) first_step_ops_ = ops;
      else add_op_times(profiled_ops_, ops);
    }
    summary.losses.push_back(rec.loss);
    tokens_done += tokens_per_step;

    const bool final_step = state.step == last;
    // The end of training, not of this invocation: a run stopped early (--stop-after) and resumed
    // logs the evaluations an uninterrupted run logs, no more.
    if (t.eval_every > 0 && (state.step % t.eval_every == 0 || state.step == t.steps)) {
      summary.last_eval_loss = evaluate();
      if (log) log->append_eval(state.step, summary.last_eval_loss);
      if (progress) {
        char line[96];
        std::snprintf(line, sizeof line, "step %5lld | eval loss %.4f | %.4f bits per byte", state.step,
                      summary.last_eval_loss, summary.last_eval_loss / std::log(2.0) / eval_bytes_per_token_);
        progress->message(line);
      }
    }
    if (progress && progress->due(state.step, final_step)) {
      const double elapsed = seconds_since(run_start);
      progress->step(step_text({.step = state.step, .steps = t.steps, .loss = rec.loss, .aux_loss = rec.aux_loss,
                                .lr = rec.lr, .grad_norm = rec.grad_norm, .tokens_per_s = rec.tokens_per_s,
                                .flops_per_s = rec.flops_per_s, .mtp_loss = m.mtp.depth > 0 ? rec.mtp_loss : -1,
                                .mfu = peak > 0 ? rec.mfu : -1,
                                .eta_s = elapsed / (state.step - summary.first_step) * (last - state.step)}));
    }
    // A signal may reach the ranks at different steps: they stop together.
    std::vector<double> stop_votes{double(g_stop_requested)};
    opt_.world->all_reduce_sum(stop_votes);
    const bool stop = stop_votes[0] > 0;
    // checkpoint.final = false (benchmarks) leaves out the end of training's and a signal's
    // checkpoints; a --stop-after slice still writes its own, which the next slice resumes from.
    const bool sliced = final_step && state.step < t.steps;
    const bool periodic = cfg_.checkpoint.every > 0 && state.step % cfg_.checkpoint.every == 0;
    const bool saved = periodic || sliced || ((final_step || stop) && cfg_.checkpoint.final);
    if (saved) {
      std::vector<float> values = optimizer_->export_values(), exp_avg, exp_avg_sq;
      optimizer_->export_moments(exp_avg, exp_avg_sq);
      save_checkpoint(run_dir_, {params, values, exp_avg, exp_avg_sq}, state,
                      {cfg_.resolved_toml, layout_, cfg_.checkpoint.keep}, groups_);
      last_checkpoint = checkpoint_dir(run_dir_, state.step);
      if (progress && (stop || final_step)) progress->message("checkpoint: " + last_checkpoint);
    }
    if (stop) {
      summary.interrupted = true;
      if (progress)
        progress->message("moetrain: stopped by signal after step " + std::to_string(state.step) +
                          (saved ? "; resume with the same command"
                                 : "; no checkpoint written (checkpoint.final = false): the same command " +
                                       (last_checkpoint.empty() ? std::string("starts again from step 0")
                                                                : "resumes from " + last_checkpoint)));
      break;
    }
  }
  if (progress) progress->finish();
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  std::signal(SIGUSR1, old_usr1);
  if (profile_ && lead_) {
    const bool first_only = profiled_steps_ <= 1;
    std::printf("%s", op_profile_table(first_only ? first_step_ops_ : profiled_ops_, first_only ? 1 : profiled_steps_ - 1).c_str());
  }
  summary.last_step = state.step;
  summary.memory = memory_use();
  summary.fallbacks = fallbacks();
  summary.elapsed_s = seconds_since(run_start);
  summary.tokens_per_s = summary.elapsed_s > 0 ? tokens_done / summary.elapsed_s : 0;
  return summary;
}

}  // namespace mt
