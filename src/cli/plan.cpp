// `moetrain plan`: step time, MFU and memory of parallel layouts on a cluster; one layout, or a search.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/command.hpp"
#include "config/config.hpp"
#include "model/flops.hpp"
#include "plan/plan_report.hpp"
#include "plan/search.hpp"
#include "plan/software.hpp"
#include "util/cli_checks.hpp"
#include "util/error.hpp"

namespace mt::cli {

namespace {

struct PlanArgs {
  std::string experiment, cluster, layout, software = "moetrain";
  std::vector<std::string> sets;
  int gpus = 0, top = 10, max_cp = 1;
  bool fp8 = false, explain = false, json = false;
};

// The header above the table: what was planned, and with a search how many layouts it weighed.
void print_header(const PlanArgs& o, const mt::Config& cfg, const mt::plan::Cluster& c, int gpus, bool fp8,
                  const mt::plan::SearchResult& found) {
  std::printf("plan: %s on %d of %s (%s)\n", cfg.run.name.c_str(), gpus, c.name.c_str(), o.cluster.c_str());
  std::printf("global batch %d sequences of %d tokens; %.1f GFLOP per token (causal%s)\n",
              cfg.training.global_batch, cfg.model.seq_len, mt::training_flops_per_token(cfg.model) / 1e9,
              cfg.model.mtp.depth > 0 ? ", with MTP" : "");
  if (o.layout.empty())
    std::printf("searched %d valid layouts (precision.matmul = %s); %d did not fit in memory\n", found.considered,
                fp8 ? "fp8" : "bf16", found.too_big);
}

int run_plan(const PlanArgs& o) {
  using namespace mt::plan;
  mt::Config cfg = mt::load_config(o.experiment, o.sets);
  Cluster c = load_cluster(o.cluster);
  SoftwareProfile software;
  try {
    software = load_software(software_dir_for(o.cluster), o.software);
  } catch (const mt::UserError& e) {
    throw mt::UserError(std::string("plan: --software: ") + e.what());
  }
  software.apply_to(c);
  const int gpus = o.gpus > 0 ? o.gpus : c.accelerators;
  if (gpus > c.accelerators)
    throw mt::UserError("plan: --gpus " + std::to_string(gpus) + " is more than the " +
                        std::to_string(c.accelerators) + " accelerators of " + o.cluster);
  const int batch = cfg.training.global_batch;
  // FP8 means what it means to train: precision.matmul = "fp8" (--fp8 is short for that --set).
  const bool fp8 = o.fp8 || cfg.precision.matmul == mt::MatmulPrecision::fp8;
  std::vector<Estimate> rows;
  const Estimate* best = nullptr;
  const Estimate* flat = nullptr;
  SearchResult found;
  const FixedSettings fixed{cfg.parallel.ep_receive_bound, mt::fp8_code_bytes(cfg.fp8), optimizer_plan(cfg.optimizer)};
  if (!o.layout.empty()) {
    Layout l = parse_layout(o.layout, gpus);
    fixed.apply_to(l);
    if (std::string why = layout_problem(cfg.model, batch, c, l); !why.empty())
      throw mt::UserError("plan: --layout " + o.layout + ": " + why);
    rows.push_back(estimate_step(cfg.model, batch, c, l, fixed.optimizer));
  } else {
    found = search_layouts(cfg.model, batch, c, gpus, fp8, o.max_cp, fixed);
    if (found.ranked.empty()) throw mt::UserError("plan: " + no_layout_reason(cfg.model, batch, c, gpus, fp8, found));
    for (const Estimate& e : found.ranked) {
      if (!best) best = &e;
      if (!flat && e.layout.pp == 1) flat = &e;
    }
    rows.assign(found.ranked.begin(), found.ranked.begin() + std::min<size_t>(found.ranked.size(), o.top));
  }
  if (o.json) {
    std::fputs(estimates_json(cfg.run.name, c, gpus, rows).c_str(), stdout);
    return 0;
  }
  print_header(o, cfg, c, gpus, fp8, found);
  std::printf("%s", estimates_table(rows).c_str());
  std::printf("%s", train_lines(rows).c_str());
  if (o.explain) std::printf("\n%s%s", software_explained(c, software).c_str(), explain(best, flat).c_str());
  return 0;
}

}  // namespace

Command add_plan(CLI::App& app) {
  auto plan = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand("plan",
      "Predict step time, MFU and memory of parallel layouts on a cluster, and search for the best");
  cmd->add_option("experiment", plan->experiment, "experiment file (its model and global batch)")->required();
  cmd->add_option("--cluster", plan->cluster, "cluster profile, e.g. configs/clusters/h800-deepseek.toml")
      ->required();
  cmd->add_option("--gpus", plan->gpus, "accelerators to use (default: the whole cluster)")
      ->check(mt::whole_in(1, 1 << 24));
  cmd->add_option("--layout", plan->layout,
                  "evaluate one layout: tp=1,pp=16,ep=64,schedule=dualpipe,zero=1,mbs=1,recompute=none,fp8=on")
      ->check(mt::not_empty("a layout such as tp=1,pp=16"));
  cmd->add_flag("--fp8", plan->fp8,
                "search FP8 layouts: short for --set precision.matmul=fp8 (default: the experiment's precision)");
  cmd->add_option("--top", plan->top, "layouts to print (default 10)")->check(mt::whole_in(1, 1'000'000));
  cmd->add_option("--max-cp", plan->max_cp,
                  "also search context parallelism up to this many ranks per sequence (powers of two; "
                  "planned only: train does not run cp > 1)")
      ->check(mt::whole_in(1, 1 << 16));
  cmd->add_flag("--explain", plan->explain, "compare the best layout with the best one without pipeline parallelism");
  cmd->add_option("--software", plan->software,
                  "the trainer whose software profile (configs/software/NAME.toml) the plan models: moetrain "
                  "(default), megatron, torchtitan, maxtext, deepseek or other");
  cmd->add_flag("--json", plan->json, "print the layouts as JSON");
  cmd->add_option("--set", plan->sets, "override an experiment key (repeatable)")->allow_extra_args(false);
  return {cmd, [plan] { return run_plan(*plan); }};
}

}  // namespace mt::cli
