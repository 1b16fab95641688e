// Trainer::run(): each step, its record, the evaluations and the checkpoints.
#include <cmath>
#include <cstdio>
#include <optional>

#include "comm/comm.hpp"
#include "ops/backend/cuda_backend.hpp"
#include "train/non_finite.hpp"
#include "train/stop_signal.hpp"
#include "train/trainer_running.hpp"
#include "train/update.hpp"
#include "util/error.hpp"

namespace mt {

TrainSummary Trainer::run() {
  TrainSummary summary;
  summary.unigram_entropy = train_data_->unigram_entropy();
  Running r;
  open_run(r, summary);
  {
    const StopSignals signals(lead_, cfg_.checkpoint.final);
    summary.first_step = r.state.step;
    r.start = Clock::now();
    while (r.state.step < r.last) {
      const StepRecord rec = train_step(r, summary);
      record(r, rec, summary);
      const bool final_step = r.state.step == r.last;
      evaluate_if_due(r, summary);
      report_step(r, rec, summary, final_step);
      if (checkpoint_if_due(r, final_step)) {
        summary.interrupted = true;
        break;
      }
    }
    if (r.progress) r.progress->finish();
  }
  if (profile_ && lead_) {
    const bool first_only = profiled_steps_ <= 1;
    std::printf("%s", op_profile_table(first_only ? first_step_ops_ : profiled_ops_,
                                       first_only ? 1 : profiled_steps_ - 1).c_str());
    std::printf("%s", counters_->profile_text().c_str());
    print_attention_shapes();
  }
  if (opt_.check_capture) summary.capture_failed = !report_capture();
  summary.last_step = r.state.step;
  summary.memory = memory_use();
  summary.fallbacks = fallbacks();
  summary.elapsed_s = seconds_since(r.start);
  summary.tokens_per_s = summary.elapsed_s > 0 ? r.tokens_done / summary.elapsed_s : 0;
  return summary;
}

// The attention shapes of the first stage's stream, each with what ran it (cuDNN or the own kernels).
void Trainer::print_attention_shapes() const {
  if (runtime_.device.choice.owned != DeviceChoice::Owned::cuda) return;
  const std::string shapes = cuda_attention_shapes(runtime_.device.choice.backend);
  if (!shapes.empty()) std::printf("attention with bf16 products, by shape:\n%s", shapes.c_str());
}

// The step's micro-batches from the training order; a shard changed under the run stops it.
FillMicroBatch Trainer::training_fill(const Running& r) const {
  return [this, &r](int mb, std::vector<int>& inputs, std::vector<int>& targets) {
    try {
      train_batches_->fill(r.state.samples_seen + plan_.first_sample(mb), plan_.micro_batch, inputs, targets);
    } catch (const ShardChanged& e) {
      throw UserError(std::string(e.what()) + "; step " + std::to_string(r.state.step + 1) + " stopped before " +
                      "its update, and " +
                      (r.last_checkpoint.empty() ? "no checkpoint was written before it"
                                                 : "the newest checkpoint is " + r.last_checkpoint) +
                      ": with the shard restored, the same command resumes there");
    }
  };
}

// One optimizer step: the passes, the update, and the step's record, its times gathered from every rank.
StepRecord Trainer::train_step(Running& r, const TrainSummary& summary) {
  const long tokens_per_step = long(cfg_.training.global_batch) * cfg_.model.seq_len;
  const auto step_start = Clock::now();
  // What the layers' communicators did since the last step (an evaluation) is not this step's.
  for (CommSeconds& c : comm_seconds_) c = {};
  for (CommTimers& c : comm_timers_) c.tp->take_seconds(), c.ep->take_seconds();
  // The update is queued behind the passes; the host waits once, for the step's scalars.
  counters_->begin_step();
  DeviceTimer sync_time(model_->backend()), update_time(model_->backend());
  double lr = 0;
  const StepTotals totals =
      run_step(*model_, schedule_, groups_, plan_, training_fill(r), *transfers_, *scalars_, {}, [&] {
        // The checked region takes in the update: its launches read the step's coefficients from
        // device memory. It ends before the download of the step's scalars.
        model_->settle_arenas();
        update_time.time([&] {
          lr = queue_update(*model_, *optimizer_, cfg_, {r.state.lr_start, r.state.lr_end}, r.state.step, *scalars_,
                            sync_time, update_graph());
        });
        counters_->end_region();
      });
  CommSeconds in_layers;
  for (size_t c = 0; c < comm_seconds_.size(); ++c) {
    in_layers.tp += comm_seconds_[c].tp + comm_timers_[c].tp->take_seconds();
    in_layers.ep += comm_seconds_[c].ep + comm_timers_[c].ep->take_seconds();
  }
  StepRecord rec;
  rec.loss = totals.ce_sum / double(tokens_per_step);
  rec.aux_loss = totals.aux;
  rec.mtp_loss = totals.mtp;
  UpdateStats update = update_record(*model_, *optimizer_, cfg_, *scalars_, lr);
  update.time_grad_sync = sync_time.take_seconds();
  if (!std::isfinite(rec.loss) || !update.applied)
    throw UserError(non_finite_message(run_dir_, r.state.step + 1, rec.loss, update.grad_norm, summary.first_step,
                                       summary.losses));
  rec.grad_norm = update.grad_norm;
  rec.lr = update.lr;
  rec.expert_load = std::move(update.expert_load);
  rec.expert_bias = std::move(update.expert_bias);
  r.state.step++;
  r.state.samples_seen += cfg_.training.global_batch;
  rec.step = r.state.step;
  rec.time_forward = totals.t_forward;
  rec.time_backward = totals.t_backward;
  rec.time_optimizer = update_time.take_seconds();
  rec.time_step = seconds_since(step_start);
  rec.tokens_per_s = tokens_per_step / rec.time_step;
  rec.flops_per_s = rec.tokens_per_s * r.flops_per_token;
  const std::vector<float> phases{float(totals.t_forward + totals.t_backward + totals.t_overlapped),
                                  float(in_layers.tp), float(in_layers.ep), float(totals.t_pipeline_wait),
                                  float(update.time_grad_sync), float(rec.time_optimizer - update.time_grad_sync),
                                  float(rec.time_step)};
  rec.rank_phases.resize(size_t(kPhases) * opt_.world->size());
  opt_.world->all_gather(phases, rec.rank_phases);
  rec.mfu = r.peak > 0 ? rec.flops_per_s / r.peak : NAN;
  const StepCounts counts = counters_->end_step(rec.step);
  rec.counters = counter_row(counts);
  rec.op_launches = op_launch_row(counts);
  return rec;
}

void Trainer::record(Running& r, const StepRecord& rec, TrainSummary& summary) {
  if (r.log) r.log->append(rec);
  if (profile_) {
    // The first step of a run warms caches and allocators: the mean leaves it out when others follow.
    std::vector<OpKindTime> ops = profile_->take();
    if (std::optional<OpKindTime> muon = optimizer_->take_muon_communication()) ops.push_back(*muon);
    if (profiled_steps_++ == 0) first_step_ops_ = ops;
    else add_op_times(profiled_ops_, ops);
  }
  summary.losses.push_back(rec.loss);
  r.tokens_done += double(cfg_.training.global_batch) * cfg_.model.seq_len;
}

// training.cuda_graph: the update's graph on one rank. With several, its gradient sums are calls of
// the communicator that bypass the Backend, which a replay of the update's host code would make again.
GraphCapture* Trainer::update_graph() const { return opt_.world->size() == 1 ? runtime_.graph.get() : nullptr; }

// --check-capture's verdict: each failing rank lists its problems, the first rank sums up.
bool Trainer::report_capture() const {
  const CaptureReport& c = counters_->capture();
  const int rank = opt_.world->rank();
  for (const std::string& p : c.problems) std::printf("capture check: rank %d: %s\n", rank, p.c_str());
  if (c.more) std::printf("capture check: rank %d: %lld more problem(s)\n", rank, c.more);
  std::string causes;
  for (const auto& [cause, n] : c.causes) {
    if (!causes.empty()) causes += "; ";
    causes += std::to_string(n) + " x " + cause;
  }
  if (!causes.empty()) std::printf("capture check: rank %d: the last step's problems: %s\n", rank, causes.c_str());
  std::vector<double> failed{c.ok() ? 0.0 : 1.0};
  opt_.world->all_reduce_sum(failed);
  if (lead_ && !c.step_ops.empty()) {
    std::string ops;
    for (const auto& [kind, n] : c.step_ops) ops += (ops.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
    std::printf("capture check: compared after the passes (gradient sums, update, bias update, prepared weights): "
                "%s\n", ops.c_str());
  }
  if (lead_)
    std::printf("capture check: %lld step(s) after the first two compared on %d rank(s): %s; downloads inside "
                "the last step's passes: %lld\n",
                counters_->checked_steps(), opt_.world->size(),
                failed[0] > 0 ? (std::to_string(int(failed[0])) + " rank(s) failed").c_str() : "ok",
                c.downloads);
  std::fflush(stdout);
  return failed[0] == 0;
}

// The end of training, not of this invocation: a run stopped early (--stop-after) and resumed
// logs the evaluations an uninterrupted run logs, no more.
void Trainer::evaluate_if_due(Running& r, TrainSummary& summary) {
  const auto& t = cfg_.training;
  const long long step = r.state.step;
  if (t.eval_every <= 0 || (step % t.eval_every != 0 && step != t.steps)) return;
  summary.last_eval_loss = evaluate();
  if (r.log) r.log->append_eval(step, summary.last_eval_loss);
  if (r.progress) {
    char line[96];
    std::snprintf(line, sizeof line, "step %5lld | eval loss %.4f | %.4f bits per byte", step,
                  summary.last_eval_loss, summary.last_eval_loss / std::log(2.0) / eval_bytes_per_token_);
    r.progress->message(line);
  }
}

void Trainer::report_step(Running& r, const StepRecord& rec, const TrainSummary& summary, bool final_step) {
  const long long step = r.state.step;
  if (!r.progress || !r.progress->due(step, final_step)) return;
  const double elapsed = seconds_since(r.start);
  r.progress->step(step_text({.step = step, .steps = cfg_.training.steps, .loss = rec.loss, .aux_loss = rec.aux_loss,
                              .lr = rec.lr, .grad_norm = rec.grad_norm, .tokens_per_s = rec.tokens_per_s,
                              .flops_per_s = rec.flops_per_s,
                              .mtp_loss = cfg_.model.mtp.depth > 0 ? rec.mtp_loss : -1,
                              .mfu = r.peak > 0 ? rec.mfu : -1,
                              .eta_s = elapsed / (step - summary.first_step) * (r.last - step)}));
}

// Writes the checkpoints that are due; returns whether a signal stops the run here.
bool Trainer::checkpoint_if_due(Running& r, bool final_step) {
  const long long step = r.state.step;
  // A signal may reach the ranks at different steps: they stop together.
  std::vector<double> stop_votes{double(StopSignals::requested())};
  opt_.world->all_reduce_sum(stop_votes);
  const bool stop = stop_votes[0] > 0;
  // checkpoint.final = false (benchmarks) leaves out the end of training's and a signal's
  // checkpoints; a --stop-after slice still writes its own, which the next slice resumes from.
  const bool sliced = final_step && step < cfg_.training.steps;
  const bool periodic = cfg_.checkpoint.every > 0 && step % cfg_.checkpoint.every == 0;
  const bool saved = periodic || sliced || ((final_step || stop) && cfg_.checkpoint.final);
  if (saved) {
    std::vector<float> values = optimizer_->export_values(), exp_avg, exp_avg_sq;
    optimizer_->export_moments(exp_avg, exp_avg_sq);
    save_checkpoint(run_dir_, {model_->params, values, exp_avg, exp_avg_sq}, r.state,
                    {cfg_.resolved_toml, layout_, cfg_.checkpoint.keep}, groups_);
    r.last_checkpoint = checkpoint_dir(run_dir_, step);
    if (r.progress && (stop || final_step)) r.progress->message("checkpoint: " + r.last_checkpoint);
  }
  if (stop && r.progress)
    r.progress->message("moetrain: stopped by signal after step " + std::to_string(step) +
                        (saved ? "; resume with the same command"
                               : "; no checkpoint written (checkpoint.final = false): the same command " +
                                     (r.last_checkpoint.empty() ? std::string("starts again from step 0")
                                                                : "resumes from " + r.last_checkpoint)));
  return stop;
}

}  // namespace mt
