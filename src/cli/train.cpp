// `moetrain train`: one experiment, on the ranks mpirun started; or with --dry-run its check.
#include <cstdio>
#include <memory>

#include "cli/command.hpp"
#include "config/config.hpp"
#include "config/precision.hpp"
#include "model/flops.hpp"
#include "plan/plan_report.hpp"
#include "parallel/storage_model.hpp"
#include "plan/search.hpp"
#include "plan/software.hpp"
#include "train/progress.hpp"
#include "train/trainer.hpp"
#include "util/cli_checks.hpp"
#include "util/error.hpp"

namespace mt::cli {

namespace {

struct TrainArgs {
  std::string path;
  std::vector<std::string> sets;
  bool dry_run = false;
  long long stop_after = 0;
  bool profile = false;
  bool check_capture = false;
  std::string cluster;
};

// The planner's prediction for the layout a training config describes, on `cluster_path`.
void print_prediction(const mt::Config& cfg, const std::string& cluster_path) {
  using namespace mt::plan;
  Cluster c = load_cluster(cluster_path);
  load_software(software_dir_for(cluster_path), "moetrain").apply_to(c);
  Layout l = mt::layout_of_config(cfg);
  // What moetrain stores: fp32, and under bf16 GEMMs what only GEMMs (and SwiGLU) read in bfloat16.
  l.storage = mt::storage_of(cfg.precision);
  if (std::string why = layout_problem(cfg.model, cfg.training.global_batch, c, l); !why.empty())
    throw mt::UserError("train --cluster " + cluster_path + ": the planner cannot model this layout: " + why);
  const Estimate e = estimate_step(cfg.model, cfg.training.global_batch, c, l, optimizer_plan(cfg.optimizer));
  std::printf("%s", prediction_text(e, c).c_str());
}

// The experiment checked for `needed` ranks: the command that runs it, its size, and the resolved config.
int dry_run(const mt::Config& cfg, const TrainArgs& a, long long needed) {
  std::printf("%s: valid\n", a.path.c_str());
  if (needed > 1) {
    // The command that runs what was just checked, the --set arguments included.
    std::string command = "mpirun -np " + std::to_string(needed) + " moetrain train " + a.path;
    for (const std::string& s : a.sets) command += " --set " + s;
    std::printf("ranks %lld: %s\n", needed, command.c_str());
  }
  std::printf("params %.3fM total, %.3fM active per token; %.2f MFLOP per token (training)\n",
              mt::total_params(cfg.model) / 1e6, mt::active_matmul_params(cfg.model) / 1e6,
              mt::training_flops_per_token(cfg.model) / 1e6);
  if (!a.cluster.empty()) print_prediction(cfg, a.cluster);
  std::printf("--- resolved config ---\n%s", cfg.resolved_toml.c_str());
  return 0;
}

// What rank 0 prints when the run ends.
void print_summary(const mt::Config& cfg, const mt::TrainSummary& s, const std::string& run_dir) {
  if (!s.losses.empty())
    std::printf("done: %lld steps, final loss %.4f (unigram entropy of the data %.4f), %.0f tok/s; log %s/log.h5\n",
                s.last_step, s.losses.back(), s.unigram_entropy, s.tokens_per_s, run_dir.c_str());
  const auto& mem = s.memory;
  std::printf("memory: per rank (the most of any rank): weights %.3f MB, gradients %.3f MB, optimizer %.3f MB, "
              "activations %.3f MB (%.3f MB at most in use)\n",
              mem.weights / 1e6, mem.gradients / 1e6, mem.optimizer / 1e6, mem.activations / 1e6,
              mem.activations_used / 1e6);
  if (mem.host_estimate > 0)
    std::printf("memory: host peak %.3f GB resident (VmHWM), estimated %.3f GB before the run (docs/memory.md)\n",
                mem.host_peak / 1e9, mem.host_estimate / 1e9);
  // A line per kind of GEMM that fell back; a run where everything ran as chosen (every CPU
  // run) prints nothing more.
  for (const std::string& line : s.fallbacks.counted_lines()) std::printf("%s\n", line.c_str());
  std::printf("%s\n", mt::summary_line({.run = cfg.run.name, .steps = s.last_step,
                                        .complete = s.last_step >= cfg.training.steps, .interrupted = s.interrupted,
                                        .loss = s.losses.empty() ? -1 : s.losses.back(),
                                        .eval_loss = s.last_eval_loss, .tokens_per_s = s.tokens_per_s,
                                        .elapsed_s = s.elapsed_s}).c_str());
}

int run_train(const TrainArgs& a, mt::Comm* world) {
  mt::Config cfg = mt::load_config(a.path, a.sets);
  const auto& p = cfg.parallel;
  const long long needed = (long long)p.dp * p.tp * p.pp;
  const int ranks = world ? world->size() : 1;
  // A dry run checks a layout for any number of ranks: it says how many to start.
  if (needed != ranks && !a.dry_run) {
    const std::string started =
        world ? "mpirun started " + std::to_string(ranks) : std::string("this run has 1 (no mpirun)");
    const std::string or_dp =
        ranks % (p.tp * p.pp) == 0 ? " or set parallel.dp = " + std::to_string(ranks / (p.tp * p.pp)) : "";
    throw mt::UserError(cfg.origin.at("parallel.dp") + ": parallel.dp * tp * pp = " + std::to_string(needed) +
                        " ranks, but " + started + ": start it with `mpirun -np " + std::to_string(needed) +
                        " moetrain train " + a.path + "`" + or_dp);
  }
  if (a.dry_run) return dry_run(cfg, a, needed);
  if (!a.cluster.empty())
    throw mt::UserError("train --cluster " + a.cluster +
                        " predicts with --dry-run only: add --dry-run, or leave it out");
  mt::TrainOptions opt;
  opt.world = ranks > 1 ? world : nullptr;
  opt.stop_after = a.stop_after;
  opt.profile = a.profile;
  opt.check_capture = a.check_capture;
  mt::Trainer trainer(cfg, opt);
  mt::TrainSummary s = trainer.run();
  if (!world || world->rank() == 0) print_summary(cfg, s, trainer.run_dir());
  if (s.interrupted) return 130;
  return s.capture_failed ? 1 : 0;
}

}  // namespace

Command add_train(CLI::App& app, Comm* world) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* train = app.add_subcommand("train", "Train the experiment described by a TOML file");
  train->add_option("experiment", a->path, "experiment file, e.g. configs/tiny.toml")->required();
  add_set_option(train, a->sets);
  train->add_flag("--dry-run", a->dry_run, "validate the experiment and print the resolved config, then stop");
  train->add_option("--stop-after", a->stop_after,
                    "stop with a checkpoint once N steps are done in total; the same command resumes")
      ->check(mt::whole_in(1, 1'000'000'000));
  train->add_option("--cluster", a->cluster,
                    "with --dry-run: print the planner's step time and memory per rank for this layout on a cluster "
                    "profile, e.g. configs/clusters/h800-deepseek.toml")
      ->check(mt::not_empty("a cluster profile"));
  train->add_flag("--profile", a->profile,
                  "time every op kind on the device and print where a step's time goes (mean over the steps after "
                  "the first)");
  train->add_flag("--check-capture", a->check_capture,
                  "trace every step's device ops and check that each step after the first repeats the last one's "
                  "(sizes, pointers, streams) without a download, host sync or allocation inside it, as a CUDA "
                  "graph's replay needs; exits 1 with the differences when not");
  return {train, [a, world] { return run_train(*a, world); }};
}

}  // namespace mt::cli
