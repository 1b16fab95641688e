// moetrain command line: parse, dispatch to src/. User errors print one message and exit 2.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "comm/mpi_comm.hpp"
#include "config/config.hpp"
#include "config/reference.hpp"
#include "infer/sample.hpp"
#include "interop/hf.hpp"
#include "inspect/inspect.hpp"
#include "io/bpe.hpp"
#include "io/h5util.hpp"
#include "io/prepare.hpp"
#include "pipeline/check.hpp"
#include "pipeline/draw_svg.hpp"
#include "pipeline/generators.hpp"
#include "pipeline/report.hpp"
#include "plan/plan_report.hpp"
#include "plan/published.hpp"
#include "plan/search.hpp"
#include "plot/plot.hpp"
#include "sweep/sweep.hpp"
#include "config/precision.hpp"
#include "train/dump_step.hpp"
#include "train/progress.hpp"
#include "model/flops.hpp"
#include "train/trainer.hpp"
#include "util/error.hpp"
#include "util/cli_checks.hpp"
#include "util/read_file.hpp"

namespace {

// The planner's prediction for the layout a training config describes, on `cluster_path`.
void print_prediction(const mt::Config& cfg, const std::string& cluster_path) {
  using namespace mt::plan;
  const Cluster c = load_cluster(cluster_path);
  Layout l = mt::layout_of_config(cfg);
  // What moetrain stores: fp32, and under bf16 GEMMs what only GEMMs read in bfloat16.
  l.storage = mt::bf16_activations(cfg.precision) ? Storage::mixed : Storage::fp32;
  if (std::string why = layout_problem(cfg.model, cfg.training.global_batch, c, l); !why.empty())
    throw mt::UserError("train --cluster " + cluster_path + ": the planner cannot model this layout: " + why);
  std::printf("%s", prediction_text(estimate_step(cfg.model, cfg.training.global_batch, c, l), c).c_str());
}

// world: the ranks mpirun started (null without mpirun).
int cmd_train(const std::string& path, const std::vector<std::string>& sets, bool dry_run, long long stop_after,
              bool profile, const std::string& cluster, mt::Comm* world) {
  mt::Config cfg = mt::load_config(path, sets);
  const auto& p = cfg.parallel;
  const long long needed = (long long)p.dp * p.tp * p.pp;
  const int ranks = world ? world->size() : 1;
  // A dry run checks a layout for any number of ranks: it says how many to start.
  if (needed != ranks && !dry_run)
    throw mt::UserError(cfg.origin.at("parallel.dp") + ": parallel.dp * tp * pp = " + std::to_string(needed) +
                        " ranks, but " + (world ? "mpirun started " + std::to_string(ranks) : std::string("this run has 1 (no mpirun)")) +
                        ": start it with `mpirun -np " + std::to_string(needed) + " moetrain train " + path +
                        "`" + (ranks % (p.tp * p.pp) == 0 ? " or set parallel.dp = " + std::to_string(ranks / (p.tp * p.pp)) : std::string()));
  if (dry_run) {
    std::printf("%s: valid\n", path.c_str());
    if (needed > 1) {
      // The command that runs what was just checked, the --set arguments included.
      std::string command = "mpirun -np " + std::to_string(needed) + " moetrain train " + path;
      for (const std::string& s : sets) command += " --set " + s;
      std::printf("ranks %lld: %s\n", needed, command.c_str());
    }
    std::printf("params %.3fM total, %.3fM active per token; %.2f MFLOP per token (training)\n",
                mt::total_params(cfg.model) / 1e6, mt::active_matmul_params(cfg.model) / 1e6,
                mt::training_flops_per_token(cfg.model) / 1e6);
    if (!cluster.empty()) print_prediction(cfg, cluster);
    std::printf("--- resolved config ---\n%s", cfg.resolved_toml.c_str());
    return 0;
  }
  if (!cluster.empty())
    throw mt::UserError("train --cluster " + cluster + " predicts with --dry-run only: add --dry-run, or leave it out");
  mt::TrainOptions opt;
  opt.world = ranks > 1 ? world : nullptr;
  opt.stop_after = stop_after;
  opt.profile = profile;
  mt::Trainer trainer(cfg, opt);
  mt::TrainSummary s = trainer.run();
  if (!world || world->rank() == 0) {
    if (!s.losses.empty())
      std::printf("done: %lld steps, final loss %.4f (unigram entropy of the data %.4f), %.0f tok/s; log %s/log.h5\n",
                  s.last_step, s.losses.back(), s.unigram_entropy, s.tokens_per_s, trainer.run_dir().c_str());
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
  return s.interrupted ? 130 : 0;
}

int cmd_prepare(const std::vector<std::string>& inputs, const std::string& out, int vocab,
                const mt::SplitOptions& split) {
  const mt::PrepareStats st = mt::prepare_shards(inputs, out, vocab, split);
  for (const mt::InputReport& r : st.inputs) std::printf("prepare: %s\n", mt::describe(r).c_str());
  std::printf("prepare: %zu %s, %zu documents -> %s/train_000000.bin (%zu tokens), %s/val_000000.bin (%zu tokens)\n",
              st.files, st.files == 1 ? "file" : "files", st.documents, out.c_str(), st.train_tokens, out.c_str(),
              st.val_tokens);
  const double tokens = double(st.train_tokens + st.val_tokens - st.documents);  // without the document starts
  if (vocab > 0) {
    std::printf("prepare: BPE vocabulary of %d tokens%s, learned in %.1f s -> %s/tokenizer.bpe, %s/tokenizer.json\n",
                st.vocab, st.vocab < vocab ? " (no pair repeats beyond it)" : "", st.train_seconds, out.c_str(),
                out.c_str());
    std::printf("prepare: encoded %.1f MB in %.2f s (%.1f MB/s), %.3f bytes per token; set model.vocab_size = %d\n",
                double(st.bytes) / 1e6, st.encode_seconds, double(st.bytes) / 1e6 / std::max(st.encode_seconds, 1e-9),
                double(st.bytes) / tokens, st.vocab);
  } else {
    std::printf("prepare: byte-level vocabulary of %d tokens\n", mt::kByteVocab);
  }
  std::printf("prepare: unigram entropy of the training tokens %.4f nats\n", st.unigram_entropy);
  std::printf("prepare: train on them: %s\n", mt::train_command(out, vocab > 0 ? st.vocab : 0).c_str());
  return 0;
}

// `moetrain tokenize`: each file's ids as one line ("PATH<TAB>ids"), or with round_trip a check that
// decoding gives every file back byte for byte.
int cmd_tokenize(const std::string& tokenizer, const std::vector<std::string>& files, bool round_trip) {
  const mt::Bpe bpe = mt::Bpe::load(tokenizer);
  size_t bytes = 0;
  for (const std::string& path : files) {
    const std::string text = mt::read_file(path);
    const std::vector<uint16_t> ids = bpe.encode(text);
    bytes += text.size();
    if (round_trip) {
      const std::string back = bpe.decode(ids);
      if (back != text) {
        const size_t at = size_t(std::mismatch(text.begin(), text.end(), back.begin(), back.end()).first - text.begin());
        throw mt::UserError(path + ": byte " + std::to_string(at) + ": decoding its " + std::to_string(ids.size()) +
                            " tokens does not give the file back");
      }
      continue;
    }
    std::string line = path + "\t";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) line += ' ';
      line += std::to_string(ids[i]);
    }
    std::printf("%s\n", line.c_str());
  }
  if (round_trip)
    std::printf("tokenize: %zu files, %zu bytes: decode(encode(file)) is the file for every one\n", files.size(), bytes);
  return 0;
}

struct ScheduleOptions {
  std::string kind;
  int pp = 0, microbatches = 0, vpp = 1;
  bool json = false;
  std::string svg;
  mt::pipeline::Costs costs;
};

int cmd_schedule(const ScheduleOptions& o) {
  using namespace mt::pipeline;
  const Costs& c = o.costs;
  for (double v : {c.forward, c.backward, c.input_grad, c.weight_grad, c.overlapped, c.latency})
    if (!(v >= 0) || std::isinf(v))
      throw mt::UserError("schedule: costs and latency must be non-negative finite numbers");
  // The timeline holds a pass per stage chunk and micro-batch: beyond this it would take minutes.
  const long long passes = (long long)o.pp * o.vpp * o.microbatches;
  if (passes > (1 << 18))
    throw mt::UserError("schedule: --pp * --vpp * --microbatches = " + std::to_string(passes) +
                        " chunk passes is out of range (at most 262144)");
  Schedule s = make_schedule({parse_kind(o.kind), o.pp, o.microbatches, o.vpp});
  if (auto problems = check_schedule(s); !problems.empty()) {
    std::fprintf(stderr, "moetrain internal error: the generated %s schedule fails its check (a bug in moetrain):\n",
                 o.kind.c_str());
    for (const auto& p : problems) std::fprintf(stderr, "  %s\n", p.c_str());
    return 3;
  }
  Timeline tl = simulate(s, c);
  std::fputs((o.json ? schedule_json(s, tl, c) : schedule_text(s, tl, c)).c_str(), stdout);
  if (!o.svg.empty()) {
    std::FILE* f = std::fopen(o.svg.c_str(), "w");
    if (!f) throw mt::UserError("schedule: cannot write --svg " + o.svg + ": check that the directory exists");
    char title[160];
    std::snprintf(title, sizeof title, "%s, pp=%d, %d micro-batches: bubble %g per rank (max), makespan %g",
                  o.kind.c_str(), o.pp, o.microbatches, tl.max_bubble(), tl.makespan);
    std::string svg = timeline_svg(s, tl, title);
    bool ok = std::fwrite(svg.data(), 1, svg.size(), f) == svg.size();
    ok = std::fclose(f) == 0 && ok;
    if (!ok) throw mt::UserError("schedule: writing --svg " + o.svg + " failed (disk full?)");
    if (!o.json) std::printf("wrote %s\n", o.svg.c_str());
  }
  return 0;
}

struct PlanOptions {
  std::string experiment, cluster, layout;
  std::vector<std::string> sets;
  int gpus = 0, top = 10, max_cp = 1;
  bool fp8 = false, explain = false, json = false;
};

int cmd_plan(const PlanOptions& o) {
  using namespace mt::plan;
  mt::Config cfg = mt::load_config(o.experiment, o.sets);
  Cluster c = load_cluster(o.cluster);
  const int gpus = o.gpus > 0 ? o.gpus : c.accelerators;
  if (gpus > c.accelerators)
    throw mt::UserError("plan: --gpus " + std::to_string(gpus) + " is more than the " + std::to_string(c.accelerators) +
                        " accelerators of " + o.cluster);
  const int batch = cfg.training.global_batch;
  // FP8 means what it means to train: precision.matmul = "fp8" (--fp8 is short for that --set).
  const bool fp8 = o.fp8 || cfg.precision.matmul == mt::MatmulPrecision::fp8;
  std::vector<Estimate> rows;
  const Estimate* best = nullptr;
  const Estimate* flat = nullptr;
  SearchResult found;
  if (!o.layout.empty()) {
    Layout l = parse_layout(o.layout, gpus);
    if (std::string why = layout_problem(cfg.model, batch, c, l); !why.empty())
      throw mt::UserError("plan: --layout " + o.layout + ": " + why);
    rows.push_back(estimate_step(cfg.model, batch, c, l));
  } else {
    found = search_layouts(cfg.model, batch, c, gpus, fp8, o.max_cp);
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
  std::printf("plan: %s on %d of %s (%s)\n", cfg.run.name.c_str(), gpus, c.name.c_str(), o.cluster.c_str());
  std::printf("global batch %d sequences of %d tokens; %.1f GFLOP per token (causal%s)\n", batch,
              cfg.model.seq_len, mt::training_flops_per_token(cfg.model) / 1e9,
              cfg.model.mtp.depth > 0 ? ", with MTP" : "");
  if (o.layout.empty())
    std::printf("searched %d valid layouts (precision.matmul = %s); %d did not fit in memory\n", found.considered,
                fp8 ? "fp8" : "bf16", found.too_big);
  std::printf("%s", estimates_table(rows).c_str());
  std::printf("%s", train_lines(rows).c_str());
  if (o.explain) std::printf("\n%s", explain(best, flat).c_str());
  return 0;
}

int cmd_plan_check(const std::string& runs_file, bool breakdown) {
  using namespace mt::plan;
  const std::vector<PublishedRun> runs = load_published_runs(runs_file);
  std::printf("plan-check: %zu published runs of %s\n", runs.size(), runs_file.c_str());
  const std::vector<CheckedRun> checked = check_published_runs(runs);
  std::printf("%s", published_report(checked).c_str());
  if (breakdown) {
    std::vector<Estimate> rows;
    for (const CheckedRun& c : checked) rows.push_back(c.estimate);
    std::printf("\npredicted, run by run (numbered as above):\n%s", estimates_table(rows).c_str());
  }
  return 0;
}

int cmd_plot(const std::vector<std::string>& runs, const std::string& out, bool log_steps, long long smooth) {
  const mt::plot::PlotResult r = mt::plot::plot_runs(runs, out, log_steps, smooth);
  for (const std::string& note : r.notes) std::printf("plot: %s\n", note.c_str());
  for (const std::string& path : r.written) std::printf("plot: wrote %s\n", path.c_str());
  return 0;
}

// CLI11 exits 100-114 on a bad command line; moetrain exits 2 on bad input like every other, and without a
// known command it prints the usage and the commands.
int command_line_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help
  const std::vector<CLI::App*> used = app.get_subcommands();
  if (used.empty()) {
    const bool named = argc > 1 && argv[1][0] != '-';
    std::fprintf(stderr, "%s", app.help().c_str());
    std::fprintf(stderr, "error: %s: give one of the commands above, e.g. `moetrain train EXPERIMENT`\n",
                 named ? ("'" + std::string(argv[1]) + "' is not a moetrain command").c_str() : "no command given");
    return 2;
  }
  const std::string command = used.front()->get_name();
  std::fprintf(stderr, "error: %s: %s\n`moetrain %s --help` lists its options\n", command.c_str(), e.what(),
               command.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  mt::h5::no_cleanup_at_exit();
  // Under mpirun every rank joins the job before anything else; without it, no MPI at all.
  std::optional<mt::MpiSession> mpi;
  std::unique_ptr<mt::Comm> world;
  if (mt::started_by_mpirun()) {
    mpi.emplace(&argc, &argv);
    world = mpi->world();
  }
  CLI::App app{"moetrain: a trainer for DeepSeek-V3-style Mixture-of-Experts transformers"};
  app.require_subcommand(1);

  std::string exp_path;
  std::vector<std::string> sets;
  bool dry_run = false;
  long long stop_after = 0;
  bool profile = false;
  std::string train_cluster;
  CLI::App* train = app.add_subcommand("train", "Train the experiment described by a TOML file");
  train->add_option("experiment", exp_path, "experiment file, e.g. configs/tiny.toml")->required();
  train->add_option("--set", sets, "override a key: --set section.key=value (repeatable)")->allow_extra_args(false);
  train->add_flag("--dry-run", dry_run, "validate the experiment and print the resolved config, then stop");
  train->add_option("--stop-after", stop_after,
                    "stop with a checkpoint once N steps are done in total; the same command resumes")
      ->check(mt::whole_in(1, 1'000'000'000));
  train->add_option("--cluster", train_cluster,
                    "with --dry-run: print the planner's step time and memory per rank for this layout on a cluster "
                    "profile, e.g. configs/clusters/h800-deepseek.toml")
      ->check(mt::not_empty("a cluster profile"));
  train->add_flag("--profile", profile,
                  "time every op kind on the device and print where a step's time goes (mean over the steps after "
                  "the first)");

  std::vector<std::string> inputs;
  std::string out_dir;
  int prepare_vocab = 0;
  CLI::App* prepare = app.add_subcommand("prepare", "Tokenize text files into token shards (bytes, or byte-level BPE)");
  prepare->add_option("--input", inputs, "text files or directories (repeatable)")->required();
  prepare->add_option("--out", out_dir, "output directory for train_000000.bin and val_000000.bin")->required();
  prepare->add_option("--vocab", prepare_vocab,
                      "learn a byte-level BPE of this many tokens (257..65536) from the training documents and "
                      "encode with it (writes tokenizer.bpe and tokenizer.json beside the shards); 0 = bytes")
      ->check(CLI::Range(0, 65536));
  std::string prepare_split, prepare_separator;
  size_t prepare_piece_bytes = 0;
  prepare->add_option("--split", prepare_split,
                      "how each file is cut into documents: auto (the default: a file with lines holding only "
                      "\"%\" at those lines, as fortune files are, any other at blank lines), paragraphs (at "
                      "blank lines), separator (at lines holding only --separator), bytes (pieces of at most "
                      "--piece-bytes, cut at a line break or a space), file (one document per file)");
  CLI::Option* separator_opt = prepare->add_option(
      "--separator", prepare_separator, "with --split separator: the line between documents (default \"%\")");
  CLI::Option* piece_opt = prepare->add_option(
      "--piece-bytes", prepare_piece_bytes,
      "with --split bytes: the most bytes in a document (default " + std::to_string(mt::kDefaultPieceBytes) + ")")
      ->check(mt::whole_in(mt::kMinPieceBytes, 1LL << 40));

  std::string tokenizer_path;
  std::vector<std::string> tokenize_files;
  bool tokenize_round_trip = false;
  CLI::App* tokenize = app.add_subcommand("tokenize", "Encode text files with a BPE tokenizer (prepare --vocab): ids per file");
  tokenize->add_option("--tokenizer", tokenizer_path, "tokenizer.bpe written by `moetrain prepare --vocab N`")->required();
  tokenize->add_option("files", tokenize_files, "text files, each encoded whole")->required();
  tokenize->add_flag("--round-trip", tokenize_round_trip,
                     "check that decoding gives every file back byte for byte instead of printing ids");

  std::string dump_exp, dump_out;
  std::vector<std::string> dump_sets;
  bool dump_start_only = false;
  CLI::App* dump = app.add_subcommand("dump-step",
      "Run an experiment's first optimizer step and write its inputs, logits, gradients and updated state to HDF5");
  dump->add_option("experiment", dump_exp, "experiment file")->required();
  dump->add_option("--out", dump_out, "output HDF5 file")->required();
  dump->add_option("--set", dump_sets, "override a key: --set section.key=value (repeatable)")->allow_extra_args(false);
  dump->add_flag("--start-only", dump_start_only, "write only the config, the initial state and the batch");
  std::string dump_from;
  dump->add_option("--from", dump_from,
                   "a checkpoint directory of the same model: its parameters instead of the initial ones")
      ->check(mt::not_empty("a checkpoint directory"));

  std::string grid_path;
  CLI::App* sweep = app.add_subcommand("sweep",
      "Train every run of a grid of config values, one after another: complete runs are skipped, "
      "interrupted ones resumed; ends with a table of the runs");
  sweep->add_option("grid", grid_path, "grid file, e.g. configs/sweeps/lr_x_balance.toml")->required();

  CLI::App* keys = app.add_subcommand("keys", "Print every experiment key with its type, valid values and default");

  ScheduleOptions sched;
  CLI::App* schedule = app.add_subcommand("schedule",
      "Generate a pipeline schedule, check it, simulate its timeline and print (or draw) it");
  schedule->add_option("--kind", sched.kind, "gpipe, 1f1b, interleaved, zb-h1, dualpipe or dualpipev")->required();
  schedule->add_option("--pp", sched.pp, "pipeline ranks")->required()->check(mt::whole_in(1, 1024));
  schedule->add_option("--microbatches", sched.microbatches,
                       "micro-batches per step (DualPipe: both directions together)")
      ->required()
      ->check(mt::whole_in(1, 1 << 16));
  schedule->add_option("--vpp", sched.vpp, "chunks per rank, interleaved only")->check(mt::whole_in(1, 1024));
  schedule->add_flag("--json", sched.json, "print {kind, pp, microbatches, ranks, ...} as JSON");
  schedule->add_option("--svg", sched.svg, "draw the simulated timeline to this SVG file");
  schedule->add_option("--cost-f", sched.costs.forward, "time of a forward chunk (default 1)");
  schedule->add_option("--cost-b", sched.costs.backward, "time of a full backward chunk (default 2)");
  schedule->add_option("--cost-i", sched.costs.input_grad, "time of the input-gradient half of a backward (default 1)");
  schedule->add_option("--cost-w", sched.costs.weight_grad, "time of the weight-gradient half of a backward (default 1)");
  schedule->add_option("--cost-fb", sched.costs.overlapped, "time of an overlapped F&B pair (default 3)");
  schedule->add_option("--latency", sched.costs.latency, "time of one point-to-point transfer (default 0)");

  PlanOptions plan;
  CLI::App* plan_cmd = app.add_subcommand("plan",
      "Predict step time, MFU and memory of parallel layouts on a cluster, and search for the best");
  plan_cmd->add_option("experiment", plan.experiment, "experiment file (its model and global batch)")->required();
  plan_cmd->add_option("--cluster", plan.cluster, "cluster profile, e.g. configs/clusters/h800-deepseek.toml")->required();
  plan_cmd->add_option("--gpus", plan.gpus, "accelerators to use (default: the whole cluster)")
      ->check(mt::whole_in(1, 1 << 24));
  plan_cmd->add_option("--layout", plan.layout,
                       "evaluate one layout: tp=1,pp=16,ep=64,schedule=dualpipe,zero=1,mbs=1,recompute=none,fp8=on")
      ->check(mt::not_empty("a layout such as tp=1,pp=16"));
  plan_cmd->add_flag("--fp8", plan.fp8,
                     "search FP8 layouts: short for --set precision.matmul=fp8 (default: the experiment's precision)");
  plan_cmd->add_option("--top", plan.top, "layouts to print (default 10)")->check(mt::whole_in(1, 1'000'000));
  plan_cmd->add_option("--max-cp", plan.max_cp,
                       "also search context parallelism up to this many ranks per sequence (powers of two; "
                       "planned only: train does not run cp > 1)")
      ->check(mt::whole_in(1, 1 << 16));
  plan_cmd->add_flag("--explain", plan.explain, "compare the best layout with the best one without pipeline parallelism");
  plan_cmd->add_flag("--json", plan.json, "print the layouts as JSON");
  plan_cmd->add_option("--set", plan.sets, "override an experiment key (repeatable)")->allow_extra_args(false);

  std::vector<std::string> inspect_paths;
  mt::InspectOptions inspect_opt;
  std::string runs_file = "configs/published/runs.toml";
  CLI::App* plan_check = app.add_subcommand(
      "plan-check", "Predict every published run of a runs file and print each error and their distribution");
  plan_check->add_option("runs", runs_file, "runs file (default configs/published/runs.toml)");
  bool check_breakdown = false;
  plan_check->add_flag("--breakdown", check_breakdown, "also print each run's predicted time breakdown and layout");
  CLI::App* inspect = app.add_subcommand("inspect",
      "Summarize a run (or compare several, or show a checkpoint): progress, losses, speed, expert balance");
  inspect->add_option("paths", inspect_paths, "run directories (runs/tiny) or checkpoint directories "
                      "(runs/tiny/ckpt/step_00000300)")->required();
  CLI::Option* inspect_json = inspect->add_flag("--json", inspect_opt.json, "print a JSON array, one object per run");
  inspect->add_flag("--csv", inspect_opt.csv, "print CSV with a header row, one row per run")->excludes(inspect_json);
  inspect->add_option("--window", inspect_opt.window, "steps the smoothed training loss averages over (default 20)")
      ->check(mt::whole_in(1, 1'000'000'000));

  mt::SampleOptions sample_opt;
  CLI::App* sample = app.add_subcommand("sample", "Continue a prompt with a trained run's newest checkpoint, one token at a time (key/value cache)");
  sample->add_option("run", sample_opt.run_dir, "run directory holding ckpt/, e.g. runs/tiny")->required();
  sample->add_option("--prompt", sample_opt.prompt, "text to continue (default: none, a new document)");
  sample->add_option("--tokens", sample_opt.tokens, "new tokens at most (default 200; the model's seq_len bounds prompt + sample)")
      ->check(mt::whole_in(1, 1 << 20));
  sample->add_option("--temperature", sample_opt.temperature, "0 picks the likeliest token; above 1 flattens (default 0.8)")
      ->check(mt::finite_at_least(0));
  sample->add_option("--top-k", sample_opt.top_k,
                     "draw among the k likeliest tokens, 0 = all (default 40; at most model.vocab_size)")
      ->check(mt::whole_in(0, 1 << 24));
  sample->add_option("--seed", sample_opt.seed, "random seed of the draws (default 0)")->check(mt::unsigned_64());
  sample->add_option("--device", sample_opt.device,
                     "auto, cpu, cuda or cpu-strict (default: the run's precision.device)")
      ->check(mt::not_empty("auto, cpu, cuda or cpu-strict"));

  std::string export_run, export_out;
  CLI::App* export_cmd = app.add_subcommand("export", "Write a run's newest checkpoint as a Hugging Face model (transformers' DeepseekV3ForCausalLM)");
  export_cmd->add_option("run", export_run, "run directory holding ckpt/, e.g. runs/tiny")->required();
  export_cmd->add_option("--hf", export_out, "output directory: config.json, model.safetensors, tokenizer.json")->required();
  std::string import_dir, import_out, import_data;
  long long import_seed = 1234;
  CLI::App* import_cmd = app.add_subcommand(
      "import", "Turn a Hugging Face model into a run directory: its checkpoint and an experiment that trains it");
  import_cmd->add_option("hf", import_dir, "directory with config.json and model.safetensors")->required();
  import_cmd->add_option("--out", import_out, "new run directory: experiment.toml and ckpt/step_00000000")->required();
  import_cmd->add_option("--data", import_data,
                         "directory of shards (train_*.bin, val_*.bin) written with the model's tokenizer, "
                         "e.g. data/fortunes")
      ->required();
  import_cmd->add_option("--seed", import_seed, "the run.seed the checkpoint records (default 1234, run.seed's default)");

  std::vector<std::string> plot_runs;
  std::string plot_out;
  bool plot_log_steps = false;
  CLI::App* plot = app.add_subcommand("plot", "Draw the charts of one or more runs (loss, lr, experts, phases) as SVG files");
  plot->add_option("runs", plot_runs, "run directories holding log.h5, e.g. runs/tiny")->required();
  plot->add_option("--out", plot_out, "directory for the SVG files (created if needed)")->required();
  plot->add_flag("--log-steps", plot_log_steps, "log-scaled step axis");
  long long plot_smooth = -1;
  plot->add_option("--smooth", plot_smooth,
                   "steps of the running mean drawn bold, the same for every run; 0 or 1: none (default: a 25th of "
                   "the longest run, none below 50 steps)")
      ->check(mt::whole_in(0, 1'000'000'000));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return command_line_error(app, e, argc, argv);
  }
  try {
    if (*train) return cmd_train(exp_path, sets, dry_run, stop_after, profile, train_cluster, world.get());
    if (*prepare)
      return cmd_prepare(inputs, out_dir, prepare_vocab,
                         mt::split_options(prepare_split, separator_opt->count() ? &prepare_separator : nullptr,
                                           piece_opt->count() ? &prepare_piece_bytes : nullptr));
    if (*tokenize) return cmd_tokenize(tokenizer_path, tokenize_files, tokenize_round_trip);
    if (*sweep) {
      if (world) throw mt::UserError("sweep: start it without mpirun; it trains each run as a process of its own");
      return mt::run_sweep(grid_path);
    }
    if (*dump) {
      mt::dump_step(mt::load_config(dump_exp, dump_sets), dump_out, dump_start_only, dump_from);
      std::printf("dump-step: wrote %s\n", dump_out.c_str());
      return 0;
    }
    if (*schedule) return cmd_schedule(sched);
    if (*plan_cmd) return cmd_plan(plan);
    if (*plan_check) return cmd_plan_check(runs_file, check_breakdown);
    if (*inspect) {
      std::fputs(mt::inspect(inspect_paths, inspect_opt).c_str(), stdout);
      return 0;
    }
    if (*plot) return cmd_plot(plot_runs, plot_out, plot_log_steps, plot_smooth);
    if (*export_cmd) {
      mt::export_hf(export_run, export_out);
      return 0;
    }
    if (*import_cmd) {
      mt::import_hf(import_dir, import_out, import_data, import_seed);
      return 0;
    }
    if (*sample) {
      if (world) throw mt::UserError("sample: start it without mpirun; it runs on one device");
      mt::sample_text(sample_opt);
      return 0;
    }
    if (*keys) {
      std::fputs(mt::config_reference_markdown().c_str(), stdout);
      return 0;
    }
  } catch (const std::exception& e) {
    // One rank's failure ends the whole job: the others would wait for it forever.
    if (world && world->size() > 1) {
      std::fprintf(stderr, "error on rank %d of %d: %s\n", world->rank(), world->size(), e.what());
      std::fflush(stderr);
      mt::MpiSession::abort_job(2);
    }
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
