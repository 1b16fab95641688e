// The start of Trainer::run(): the run directory, the checkpoint it resumes from, the banner and
// the log.
#include <cstdio>
#include <filesystem>

#include "comm/comm.hpp"
#include "io/bpe.hpp"
#include "model/flops.hpp"
#include "train/lr_schedule.hpp"
#include "train/resume.hpp"
#include "train/trainer_running.hpp"
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
  if (cfg.lr_schedule.kind != LrScheduleKind::cosine || state.step < decay_end || state.step >= cfg.training.steps)
    return "";
  return cycle.start == state.step
      ? "warms up again and decays to step " + std::to_string(cycle.end) + " (lr_schedule.extend = \"rewarm\")"
      : "held at " + format_number("%.2e", learning_rate(cfg, cycle, state.step)) + " after step " +
            std::to_string(cycle.end) + " (lr_schedule.extend = \"constant\")";
}

}  // namespace

void Trainer::open_run(Running& r, TrainSummary& summary) {
  const auto& t = cfg_.training;
  make_run_dir(r);
  const Resumption res = resume(r.state);
  // --profile times the steps this command trains: with none left it would print an empty table.
  const long long until = opt_.stop_after > 0 ? std::min<long long>(opt_.stop_after, t.steps) : t.steps;
  if (profile_ && r.state.step >= until)
    throw UserError("--profile: " + *res.from + " holds step " + std::to_string(r.state.step) + " and this run " +
                    (until < t.steps ? "stops at --stop-after " + std::to_string(until)
                                     : "trains to training.steps = " + std::to_string(t.steps)) +
                    ": no step is left to time. Profile a run of its own, e.g. --set run.name=\"" + cfg_.run.name +
                    "-profile\" --set training.steps=5, or raise training.steps to time the added steps");
  if (r.state.step >= t.steps && !opt_.quiet)
    std::printf("moetrain: %s already holds step %lld of %d; nothing to train\n", res.from->c_str(), r.state.step,
                t.steps);
  if (!opt_.quiet) announce(res, r.state);
  r.last_checkpoint = res.from ? *res.from : "";
  r.flops_per_token = training_flops_per_token(cfg_.model);
  open_log(r, res, summary);
  if (!opt_.quiet) r.progress.emplace(cfg_.log.progress, cfg_.log.every);
  r.peak = (cfg_.precision.peak_tflops > 0 ? cfg_.precision.peak_tflops : device_.peak_tflops) * 1e12;
  r.last = until;
}

void Trainer::make_run_dir(Running& r) const {
  std::error_code ec;
  std::filesystem::create_directories(run_dir_, ec);
  if (ec) throw UserError(run_dir_ + ": cannot create the run directory: " + ec.message());
  if (lead_) r.lock.emplace(run_dir_);
  // The run keeps its tokenizer, so that `moetrain sample` reads the run's text whatever happens
  // to the shards' directory.
  const std::string tokenizer = tokenizer_beside(train_data_->files().front());
  if (lead_ && std::filesystem::exists(tokenizer)) {
    std::filesystem::copy_file(tokenizer, run_dir_ + "/tokenizer.bpe",
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) throw UserError(run_dir_ + "/tokenizer.bpe: cannot copy " + tokenizer + " there: " + ec.message());
  }
}

Trainer::Resumption Trainer::resume(TrainState& state) {
  state.lr_end = cfg_.training.steps;
  Resumption res;
  std::vector<float> values, exp_avg, exp_avg_sq;
  if (std::optional<Resumed> r =
          resume_checkpoint(run_dir_, cfg_.checkpoint.resume, {model_->params, values, exp_avg, exp_avg_sq},
                            {cfg_.resolved_toml, cfg_.origin}, *opt_.world)) {
    res.from = r->dir;
    state = r->state;
    res.changes = changes_line(state.step, r->changes);
    res.lr = resume_lr_cycle(cfg_, *r, state);
    res.layout = r->layout;
    optimizer_->import_values(values);
    optimizer_->import_moments(exp_avg, exp_avg_sq);
  }
  if (res.from && state.seed != cfg_.run.seed)
    throw UserError(cfg_.origin.at("run.seed") + ": run.seed = " + std::to_string(cfg_.run.seed) + " but " +
                    *res.from + " was trained with seed " + std::to_string(state.seed) +
                    "; use the same seed, or a new run.name / checkpoint.resume = \"never\" for a fresh run");
  state.seed = cfg_.run.seed;
  return res;
}

void Trainer::announce(const Resumption& res, const TrainState& state) const {
  print_header();
  if (res.from) {
    std::printf("  resume   from %s (step %lld)%s\n", res.from->c_str(), state.step,
                res.layout == layout_ ? "" : ("; written under " + res.layout).c_str());
    if (!res.changes.empty()) std::printf("  changed  %s (recorded in log.h5: config_changes)\n", res.changes.c_str());
    if (!res.lr.empty()) std::printf("  lr       %s\n", res.lr.c_str());
  }
  // A log without a checkpoint: an earlier run under checkpoint.final = false, or one stopped
  // before its first checkpoint. Say that this one starts over rather than continuing it.
  else if (cfg_.checkpoint.resume == "auto" && std::filesystem::exists(run_dir_ + "/log.h5"))
    std::printf("  resume   none: %s has a log.h5 but no checkpoint; training starts at step 0 and log.h5 starts "
                "over\n",
                run_dir_.c_str());
}

void Trainer::open_log(Running& r, const Resumption& res, const TrainSummary& summary) {
  const auto& m = cfg_.model;
  RunFacts facts;
  facts.config_toml = cfg_.resolved_toml;
  facts.numbers = {{"total_params", total_params(m)}, {"active_params", active_matmul_params(m)},
                   {"flops_per_token", r.flops_per_token}, {"unigram_entropy", summary.unigram_entropy},
                   {"eval_bytes_per_token", eval_bytes_per_token_}};
  facts.texts = {{"device", device_.description}, {"layout", layout_}, {"data_order", data_order_text()}};
  facts.moe_layers = moe_layer_count(m);
  facts.ranks = opt_.world->size();
  facts.experts = m.moe.n_routed_experts;
  if (qk_clip_) facts.attention_layers = qk_clip_->layers();
  facts.config_change = res.changes;
  if (lead_) r.log.emplace(run_dir_ + "/log.h5", facts, r.state.step);
}

}  // namespace mt
